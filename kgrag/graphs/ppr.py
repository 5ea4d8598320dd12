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

Each of those products touches every edge, so a question costs the whole graph: about a
second at a hundred thousand chunks. ``Walk.push`` is the local alternative (Andersen,
Chung and Lang's forward push): it moves residual mass out from the restart nodes and
stops where what is left at a node is below ε times its degree, so its work is bounded
by 1 / ((1−d)·ε) edge visits whatever the graph's size. Same walk, same dangling rule;
an approximation whose L1 error it reports exactly.
"""

from __future__ import annotations

import functools
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
        self.adjacency, self.out_weight = adjacency, out_weight
        # a push leaves a node once its residual reaches ε × its edge count (ACL's rule:
        # each push then spends ≥ (1−d)·ε of the unit residual per edge it visits); a
        # dangling node counts as one edge, so that it does not push every crumb it gets
        self.degree = np.maximum(np.diff(adjacency.indptr), 1)
        self.dangling = np.flatnonzero(out_weight == 0)  # indices: a gather per step, not a mask

    @functools.cached_property
    def transition_t(self) -> sp.csr_matrix:
        """The transition, transposed (what ``run`` multiplies by), built when a power walk
        first needs it: a push walk reads the adjacency alone, and this is as big again
        (about 60 MB at 110,056 chunks of nlp entities). The adjacency is transposed,
        then each edge divided by its source's out-weight in place: scaling the rows
        first made a third copy of the graph while it was built."""
        inverse = np.zeros(self.n)
        np.divide(1.0, self.out_weight, out=inverse, where=self.out_weight != 0)
        transposed = self.adjacency.T.tocsr()  # row j: the edges into node j
        transposed.data *= inverse[transposed.indices]
        return transposed

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

    def push(self, nodes: np.ndarray, weights: np.ndarray, damping: float = 0.85,
             epsilon: float = 1e-6) -> tuple[np.ndarray, np.ndarray, float]:
        """The walk restarting at ``nodes`` (``weights``, normalised here), approximated by
        forward push: the nodes given mass, their mass, and the L1 error.

        The estimate p and the residual r keep π = p + PPR(r) at every step, where PPR(r)
        is the same walk restarting at r (sums to Σr). Pushing a node u moves (1−d)·r(u)
        into p(u) and spreads d·r(u) over u's out-edges by weight, or, at a dangling node,
        over the restart nodes (``run``'s dangling rule, so the limit is ``run``'s π).
        Every node whose residual reaches ε × its edge count is pushed at once, a round at
        a time, until none is left; the remaining Σr is exactly ‖π − p‖₁. Only the nodes
        reached cost anything: the arrays are allocated zeroed (untouched pages are never
        written), and each round reads the edges of the nodes it pushes.
        """
        if not 0.0 <= damping < 1.0:
            raise KgragError(f"PageRank damping must be in [0, 1), got {damping}")
        if not 0.0 < epsilon < 1.0:
            raise KgragError(f"a push walk needs 0 < epsilon < 1, got {epsilon}")
        nodes = np.asarray(nodes, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.float64)
        total = weights.sum()
        if nodes.shape != weights.shape or not total > 0 or weights.min() < 0:
            raise KgragError("a push walk needs one non-negative weight per restart node, "
                             "with a positive sum")
        if nodes.size and (nodes.min() < 0 or nodes.max() >= self.n):
            raise KgragError(f"a restart node is not in the graph of {self.n} nodes")
        nodes, at = np.unique(nodes, return_inverse=True)
        restart = np.bincount(at, weights / total)
        estimate, residual = np.zeros(self.n), np.zeros(self.n)
        residual[nodes] = restart
        indptr, indices, data = self.adjacency.indptr, self.adjacency.indices, self.adjacency.data
        candidates, pushed = nodes, []
        while True:
            frontier = candidates[residual[candidates] >= epsilon * self.degree[candidates]]
            if not frontier.size:
                break
            pushed.append(frontier)
            mass = residual[frontier]
            residual[frontier] = 0.0
            estimate[frontier] += (1.0 - damping) * mass
            spread = damping * mass
            out = self.out_weight[frontier]
            live = out > 0
            lost = spread[~live].sum()  # the dangling nodes' share goes back to the restart
            starts = indptr[frontier[live]]
            counts = indptr[frontier[live] + 1] - starts
            # every pushed node's edge positions, in one array: start + 0, 1, … count − 1
            edges = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
            share = np.repeat(spread[live] / out[live], counts) * data[edges]
            reached, slot = np.unique(indices[edges], return_inverse=True)
            residual[reached] += np.bincount(slot, share, minlength=reached.size)
            if lost > 0:
                residual[nodes] += lost * restart
                reached = np.union1d(reached, nodes)
            candidates = reached
        touched = np.unique(np.concatenate(pushed)) if pushed else nodes[:0]
        return touched, estimate[touched], float(max(1.0 - estimate[touched].sum(), 0.0))


def personalised_pagerank(graph: sp.spmatrix, restart: np.ndarray | None = None,
                          damping: float = 0.85, tol: float = 1e-10) -> np.ndarray:
    """PPR of ``graph`` restarting at ``restart`` (see ``Walk.run``), for one-off use."""
    return Walk(graph).run(restart, damping, tol)
