"""Core-chunk selection for the KG skeleton (KET-RAG Alg. 3, line 8).

Only the ⌈β·n⌉ core chunks go through LLM triplet extraction, so this choice
sets most of the indexing cost. KET-RAG-P keeps the chunks with the highest
PageRank in the KNN graph, because a few central chunks link much of the
corpus (paper, Fig. 2). KET-RAG-U samples uniformly at random as the control.

PageRank is the library's sparse power iteration (``kgrag.graphs.ppr``) with a
uniform restart, instead of ``networkx.pagerank``, which would first copy the graph
into Python objects. It follows the paper's definition π = α/n·1 + (1−α)·π·P with
transition P_ij = w_ij / d(v_i). The damping is 1−α = 0.85, as in the authors'
code. A dangling node (no edges) teleports uniformly, as networkx does. The start
vector is uniform, so the result is deterministic and needs no seed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np

from kgrag.errors import KgragError
from kgrag.graphs.ppr import Walk

if TYPE_CHECKING:
    import scipy.sparse as sp

CoreMethod = Literal["pagerank", "uniform"]


def pagerank(graph: sp.spmatrix, damping: float = 0.85, tol: float = 1e-10) -> np.ndarray:
    """Return the PageRank vector of ``graph`` (sums to 1), e.g. for reports.

    ``graph`` is a square sparse matrix of non-negative edge weights; row i holds
    the edges leaving node i (the KNN graph is symmetric anyway). This is the
    library's personalised PageRank with a uniform restart (``kgrag.graphs.ppr``).
    """
    return Walk(graph).run(None, damping, tol)


def core_size(beta: float, n: int) -> int:
    """⌈β·n⌉, the number of core chunks of ``n``: β·n is rounded to 9 decimals before the
    ceiling, so that floating-point noise (0.7·10 = 7.000000000000001) does not add a
    chunk. The core step selects this many and the dry run bounds extraction calls by it.
    """
    return math.ceil(round(beta * n, 9))


def select_core(
    graph: sp.spmatrix, beta: float, method: CoreMethod = "pagerank", seed: int = 42
) -> np.ndarray:
    """Return the sorted indices of the ⌈β·n⌉ core chunks of the n-node ``graph``.

    ``method="pagerank"`` keeps the highest PageRank scores (damping 0.85);
    equal scores go to the lower index. ``method="uniform"`` draws a uniform
    sample without replacement from ``numpy.random.default_rng(seed)``. The
    default seed 42 is the authors' seed, though their generator differs, so
    the sets do not match theirs.
    """
    if method not in ("pagerank", "uniform"):
        raise KgragError(f"unknown core selection method {method!r}; use 'pagerank' or 'uniform'")
    if not 0.0 <= beta <= 1.0:
        raise KgragError(f"β (core chunk ratio) must be in [0, 1], got {beta}")
    n = graph.shape[0]
    size = core_size(beta, n)
    if size == 0:
        raise KgragError(
            f"empty skeleton: β={beta} selects no chunk of {n}; raise β or use a "
            "keyword-only method"
        )
    if method == "uniform":
        chosen = np.random.default_rng(seed).choice(n, size=size, replace=False)
    else:
        chosen = np.lexsort((np.arange(n), -pagerank(graph)))[:size]
    return np.sort(chosen).astype(np.int64)
