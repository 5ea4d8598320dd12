"""Personalised PageRank: the one random walk with restart of the library.

PageRank restarts uniformly; personalised PageRank (PPR) restarts at chosen nodes,
so its mass measures how close every node is to them in the graph. HippoRAG ranks
passages by PPR from the question's entities, which reaches the passage two links
away that one-hop expansion misses; KET-RAG's core selection is the uniform case;
ARK's curriculum needs the same walk from an answer's entities. One definition
serves them all, so that a change of convention (dangling nodes, stopping rule)
changes every use at once.

The walk is π = d·π·P + (1−d)·p with transition P_ij = w_ij / Σ_j w_ij and restart
distribution p. A dangling node (no out-edges) sends its mass to p, as networkx
does (for uniform p this is the usual uniform teleport). The transition is built
once per graph (``Walk``) and each query only iterates, which is what makes PPR a
query-time method: on a few thousand chunks and ten thousand entities, a query is
a few dozen sparse products.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kgrag.errors import KgragError

if TYPE_CHECKING:
    import scipy.sparse as sp


class Walk:
    """The transition of one graph, ready for any number of restart distributions.

    ``graph`` is a square sparse matrix of non-negative edge weights; row i holds the
    edges leaving node i (an undirected graph is symmetric).
    """

    def __init__(self, graph: sp.spmatrix) -> None:
        import scipy.sparse as sp  # imported where a walk is made, not by every command

        adjacency = sp.csr_matrix(graph, dtype=np.float64)
        n = adjacency.shape[0]
        if adjacency.shape != (n, n):
            raise KgragError(f"PageRank needs a square adjacency matrix, got {adjacency.shape}")
        if n and adjacency.min() < 0:
            raise KgragError("PageRank needs non-negative edge weights")
        out_weight = np.asarray(adjacency.sum(axis=1)).ravel()
        self.n = n
        dangling = out_weight == 0
        self.dangling = np.flatnonzero(dangling)  # indices: a gather per step, not a mask
        inverse = np.divide(1.0, out_weight, out=np.zeros(n), where=~dangling)
        self.transition_t = (sp.diags(inverse) @ adjacency).T.tocsr()

    def run(self, restart: np.ndarray | None = None, damping: float = 0.85,
            tol: float = 1e-10, max_steps: int | None = None) -> np.ndarray:
        """The stationary distribution (sums to 1) of the walk restarting at ``restart``.

        ``restart`` holds non-negative weights, one per node, normalised here (so
        specificity weights can be passed as they are); ``None`` is uniform, which is
        plain PageRank. The iteration starts from the restart distribution and stops
        once an update changes π by less than ``tol`` in L1. Its error shrinks by a
        factor ``damping`` per step, so it is also capped at the steps that bound the
        error by ``tol`` (and at ``max_steps`` when given): the loop ends even for a
        damping close to 1.
        """
        if not 0.0 <= damping < 1.0:
            raise KgragError(f"PageRank damping must be in [0, 1), got {damping}")
        if self.n == 0:
            return np.zeros(0)
        weights = np.ones(self.n) if restart is None else np.asarray(restart, dtype=np.float64)
        if weights.shape != (self.n,):
            raise KgragError(f"a restart vector needs one weight per node ({self.n}), got "
                             f"shape {weights.shape}")
        total = weights.sum()
        if not total > 0 or weights.min() < 0:
            raise KgragError("a restart vector needs non-negative weights with a positive sum")
        # (x · w) / Σw rather than x · (w / Σw): for uniform w this is exactly x / n, the
        # arithmetic of the PageRank the core selection was first measured with.
        steps = 1 if damping == 0 else math.ceil(math.log(tol / 2) / math.log(damping)) + 1
        if max_steps is not None:
            steps = min(steps, max_steps)
        scores = weights / total
        for _ in range(steps):
            restarting = damping * scores[self.dangling].sum() + 1.0 - damping
            updated = damping * (self.transition_t @ scores) + restarting * weights / total
            change = np.abs(updated - scores).sum()
            scores = updated
            if change < tol:
                break
        return scores


def personalised_pagerank(graph: sp.spmatrix, restart: np.ndarray | None = None,
                          damping: float = 0.85, tol: float = 1e-10) -> np.ndarray:
    """PPR of ``graph`` restarting at ``restart`` (see ``Walk.run``), for one-off use."""
    return Walk(graph).run(restart, damping, tol)
