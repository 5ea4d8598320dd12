"""The library's personalised PageRank (kgrag.graphs.ppr)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from kgrag.errors import KgragError
from kgrag.graphs.ppr import Walk, personalised_pagerank


def undirected(n: int, edges: list[tuple[int, int]]) -> sp.csr_matrix:
    rows = [a for a, b in edges] + [b for a, b in edges]
    cols = [b for a, b in edges] + [a for a, b in edges]
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))


def test_mass_flows_two_hops_and_decays_with_distance():
    # a path 0 - 1 - 2 - 3 and a node 4 off the path: restarting at 0 reaches 2 (two
    # hops) with more mass than 3, and 4 with none
    graph = undirected(5, [(0, 1), (1, 2), (2, 3)])
    scores = personalised_pagerank(graph, np.array([1.0, 0, 0, 0, 0]), damping=0.5)
    assert scores[2] > scores[3] > 0
    assert scores[4] == 0
    assert scores.sum() == pytest.approx(1.0)


def test_lower_damping_keeps_more_mass_at_the_seed():
    graph = undirected(4, [(0, 1), (1, 2), (2, 3)])
    seed = np.array([1.0, 0, 0, 0])
    low, high = (personalised_pagerank(graph, seed, damping=d) for d in (0.3, 0.8))
    assert low[0] > high[0]
    assert low[3] < high[3]
    assert personalised_pagerank(graph, seed, damping=0.0) == pytest.approx(seed)


def test_matches_networkx_with_a_personalisation_and_dangling_nodes():
    graph = undirected(6, [(0, 1), (1, 2), (2, 0), (2, 3)])  # 4 and 5 dangle
    restart = np.array([0.0, 2.0, 0.0, 0.0, 1.0, 1.0])
    reference = nx.pagerank(nx.from_scipy_sparse_array(graph), alpha=0.6, tol=1e-12,
                            personalization=dict(enumerate(restart)),
                            dangling=dict(enumerate(restart)))
    scores = personalised_pagerank(graph, restart, damping=0.6, tol=1e-13)
    assert scores == pytest.approx([reference[i] for i in range(6)], abs=1e-9)
    assert scores.sum() == pytest.approx(1.0)


def test_the_restart_is_normalised_so_only_its_proportions_matter():
    graph = undirected(4, [(0, 1), (1, 2), (2, 3), (3, 0)])
    walk = Walk(graph)
    assert walk.run(np.array([3.0, 1, 0, 0]), 0.5) == pytest.approx(
        walk.run(np.array([0.75, 0.25, 0, 0]), 0.5))


def test_no_restart_is_plain_pagerank():
    graph = undirected(4, [(0, 1), (0, 2), (0, 3)])
    assert Walk(graph).run(None, 0.85) == pytest.approx(
        Walk(graph).run(np.ones(4), 0.85))


@pytest.mark.parametrize("damping", [-0.1, 1.0, 1.5])
def test_damping_outside_the_unit_interval_is_refused(damping):
    with pytest.raises(KgragError, match="damping"):
        Walk(undirected(2, [(0, 1)])).run(np.array([1.0, 0]), damping)


@pytest.mark.parametrize("restart", [np.zeros(3), np.array([1.0, -1, 1]), np.ones(2)])
def test_a_restart_without_positive_mass_or_of_the_wrong_size_is_refused(restart):
    with pytest.raises(KgragError, match="restart"):
        Walk(undirected(3, [(0, 1)])).run(restart, 0.5)


def test_an_empty_graph_has_an_empty_distribution():
    assert Walk(sp.csr_matrix((0, 0))).run(None, 0.5).shape == (0,)


def test_push_converges_to_the_power_walk_with_dangling_nodes_and_reports_its_error():
    # a triangle with a tail, two dangling nodes in the restart: the push sends their
    # mass back to the restart as the power walk does, so its limit is the same π
    graph = undirected(7, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 6)])  # 4 and 5 dangle
    restart = np.array([0.0, 2.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    walk = Walk(graph)
    exact = walk.run(restart, 0.6, tol=1e-13)
    errors = []
    for epsilon in (1e-2, 1e-4, 1e-8):
        nodes, mass, error = walk.push(np.flatnonzero(restart), restart[restart > 0], 0.6,
                                       epsilon)
        estimate = np.zeros(7)
        estimate[nodes] = mass
        # the reported error is the L1 distance, and every node is an underestimate
        assert np.abs(exact - estimate).sum() == pytest.approx(error, abs=1e-9)
        assert (estimate <= exact + 1e-12).all()
        errors.append(error)
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-6


def test_push_touches_only_the_seeds_neighbourhood():
    # two components: a walk restarting in the first never reads the second's edges
    graph = undirected(6, [(0, 1), (1, 2), (3, 4), (4, 5)])
    walk = Walk(graph)
    nodes, mass, _ = walk.push(np.array([0]), np.array([1.0]), 0.5, 1e-9)
    assert set(nodes.tolist()) == {0, 1, 2} and (mass > 0).all()
    assert "transition_t" not in vars(walk)  # the power walk's transition is never built


@pytest.mark.parametrize("epsilon, nodes, weights, message", [
    (0.0, [0], [1.0], "0 < epsilon < 1"),
    (1.0, [0], [1.0], "0 < epsilon < 1"),
    (1e-4, [0], [0.0], "positive sum"),
    (1e-4, [0, 1], [1.0], "one non-negative weight per restart node"),
    (1e-4, [9], [1.0], "not in the graph"),
])
def test_push_refuses_bad_input(epsilon, nodes, weights, message):
    walk = Walk(undirected(3, [(0, 1), (1, 2)]))
    with pytest.raises(KgragError, match=message):
        walk.push(np.array(nodes), np.array(weights), 0.5, epsilon)
