"""Retriever training: each method declared once (``TrainingMethod``), like graph kinds.

A training entry compiles to fingerprinted steps; its final step's artefact folder holds
the trained model (``model/``, sentence-transformers' save format), which
``models.embedder.model`` or a naive strategy's ``embedder`` names by the entry's name
(ARK), or a scorer that a strategy names through a ``TrainedRef`` (ReG's graph
retrievers).
"""

from kgrag.spec.declarations import TrainingMethod
from kgrag.training import ark, reg

TRAINING_METHODS: dict[str, TrainingMethod] = {
    method.name: method for method in (ark.DECLARATION, reg.TRIPLE, reg.ENTITY)}
