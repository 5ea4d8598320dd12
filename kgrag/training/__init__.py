"""Model training: each method declared once (``TrainingMethod``), like graph kinds.

A training entry compiles to fingerprinted steps; its final step's artefact folder holds
the trained model: ARK's embedder (``model/``, sentence-transformers' save format), which
``models.embedder.model`` or a naive strategy's ``embedder`` names by the entry's name;
RAS's Graph-LLM, which a ras strategy's ``graph_llm`` names.
"""

from kgrag.spec.declarations import TrainingMethod
from kgrag.training import ark, ras

TRAINING_METHODS: dict[str, TrainingMethod] = {m.DECLARATION.name: m.DECLARATION
                                               for m in (ark, ras)}
