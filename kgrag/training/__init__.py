"""Model training: each method declared once (``TrainingMethod``), like graph kinds.

A training entry compiles to fingerprinted steps; its final step's artefact folder holds
the trained model: ARK's embedder (``model/``, sentence-transformers' save format), which
``models.embedder.model`` or a naive strategy's ``embedder`` names by the entry's name;
ReG's graph retrievers, which a reg strategy's ``retriever`` names, and RAS's Graph-LLM,
which a ras strategy's ``graph_llm`` names (each through a ``TrainedRef``).
"""

from kgrag.declarations import TrainingMethod
from kgrag.training import ark, ras, reg

TRAINING_METHODS: dict[str, TrainingMethod] = {
    method.name: method for method in (ark.DECLARATION, reg.TRIPLE, reg.ENTITY, ras.DECLARATION)}
