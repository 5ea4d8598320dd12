"""Step kinds, registered on import. Each module adapts one library function to the
runner's uniform ``run(ctx)`` signature; the methods themselves live elsewhere."""

from kgrag.steps import (
    answer,
    bipartite,
    chunks,
    corpus,
    dense,
    evaluate,
    hierarchy,
    retrieve,
    skeleton,
)

__all__ = ["answer", "bipartite", "chunks", "corpus", "dense", "evaluate", "hierarchy",
           "retrieve", "skeleton"]
