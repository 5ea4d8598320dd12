"""Recursive Leiden module hierarchy (HugRAG App. B.1)."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from kgrag.errors import KgragError
from kgrag.graphs.hierarchy import Hierarchy, leiden_hierarchy


def clique(prefix: str, size: int) -> list[tuple[str, str, float]]:
    names = [f"{prefix}{i}" for i in range(size)]
    return [(a, b, 1.0) for a, b in itertools.combinations(names, 2)]


def planted(groups: int = 4, size: int = 40, p_in: float = 0.3, p_out: float = 0.01):
    graph = nx.planted_partition_graph(groups, size, p_in, p_out, seed=1)
    nodes = [f"N{n:03d}" for n in graph]
    edges = [(f"N{u:03d}", f"N{v:03d}", 1.0) for u, v in graph.edges]
    return nodes, edges


def check_tree(h: Hierarchy, max_cluster_size: int, max_levels: int) -> None:
    """Structural invariants every hierarchy must satisfy."""
    by_id = {m.module_id: m for m in h.modules}
    assert [m.module_id for m in h.modules] == [f"M{i}" for i in range(1, len(h.modules) + 1)]
    keys = [(m.level, -m.size, m.entities[0]) for m in h.modules]
    assert keys == sorted(keys)
    oversized = 0
    for m in h.modules:
        assert 0 <= m.level < max_levels and m.size >= 2
        assert list(m.entities) == sorted(set(m.entities))
        if m.parent is None:
            assert m.level == 0
        else:
            parent = by_id[m.parent]
            assert parent.level == m.level - 1 and m.module_id in parent.children
            assert set(m.entities) < set(parent.entities)
        if m.children:
            assert m.size > max_cluster_size and len(m.children) >= 2
            child_sets = [set(by_id[c].entities) for c in m.children]
            assert sum(map(len, child_sets)) == len(set().union(*child_sets))  # disjoint
        elif m.size > max_cluster_size:
            oversized += 1
    assert h.oversized == oversized
    clustered = {e for m in h.modules if m.level == 0 for e in m.entities}
    assert not set(h.unclustered) & clustered


def test_two_cliques_joined_by_one_edge_give_two_level0_modules():
    edges = clique("A", 5) + clique("B", 5) + [("A0", "B0", 1.0)]
    nodes = [f"A{i}" for i in range(5)] + [f"B{i}" for i in range(5)] + ["LONE"]
    h = leiden_hierarchy(nodes, edges)
    assert [(m.module_id, m.level, m.parent, m.children) for m in h.modules] == [
        ("M1", 0, None, ()), ("M2", 0, None, ())]
    assert h.modules[0].entities == tuple(f"A{i}" for i in range(5))
    assert h.modules[1].entities == tuple(f"B{i}" for i in range(5))
    assert h.unclustered == ("LONE",) and h.oversized == 0
    assert h.levels() == {0: 2}
    assert h.leaf_module_of("B3") == "M2" and h.leaf_module_of("LONE") is None


def test_big_communities_are_split_at_level1_and_leaves_respect_the_size_cap():
    nodes, edges = planted()
    h = leiden_hierarchy(nodes, edges, max_cluster_size=10)
    check_tree(h, 10, 4)
    levels = h.levels()
    assert levels[0] == 4 and levels[1] > 4
    assert all(m.size == 40 for m in h.at_level(0))
    leaves = [m for m in h.modules if not m.children]
    assert h.oversized == 0 and all(m.size <= 10 for m in leaves)
    assert all(m.size > 10 for m in h.modules if m.children)


def test_max_levels_is_respected_and_big_leaves_are_counted():
    nodes, edges = planted()
    one = leiden_hierarchy(nodes, edges, max_levels=1)
    check_tree(one, 10, 1)
    assert one.levels() == {0: 4} and one.oversized == 4
    two = leiden_hierarchy(nodes, edges, max_levels=2)
    check_tree(two, 10, 2)
    assert set(two.levels()) == {0, 1}
    assert two.oversized == sum(1 for m in two.at_level(1) if m.size > 10) > 0


def test_unsplittable_big_module_stays_a_leaf():
    h = leiden_hierarchy([f"K{i}" for i in range(20)], clique("K", 20), max_cluster_size=10)
    assert len(h.modules) == 1 and h.modules[0].children == () and h.oversized == 1


def test_isolated_nodes_and_singletons_are_unclustered():
    edges = clique("A", 4)
    h = leiden_hierarchy(["A0", "A1", "A2", "A3", "X", "Y", "Z"], edges)
    assert h.unclustered == ("X", "Y", "Z")
    assert [m.entities for m in h.modules] == [("A0", "A1", "A2", "A3")]


def test_no_edges_gives_no_modules():
    h = leiden_hierarchy(["A", "B", "C"], [])
    assert h.modules == [] and h.unclustered == ("A", "B", "C") and h.levels() == {}
    assert leiden_hierarchy([], []).modules == []
    loops = leiden_hierarchy(["A", "B"], [("A", "A", 1.0)])
    assert loops.modules == [] and loops.unclustered == ("A", "B")


def test_deterministic_for_a_seed_and_independent_of_input_order():
    nodes, edges = planted(groups=3, size=30)
    first = leiden_hierarchy(nodes, edges, seed=7)
    assert leiden_hierarchy(nodes, edges, seed=7) == first
    rng = random.Random(0)
    shuffled_nodes, shuffled_edges = nodes[:], [(b, a, w) for a, b, w in edges]
    rng.shuffle(shuffled_nodes)
    rng.shuffle(shuffled_edges)
    assert leiden_hierarchy(shuffled_nodes, shuffled_edges, seed=7) == first


def test_membership_ancestors_and_leaf_modules_are_consistent():
    nodes, edges = planted(groups=4, size=50, p_in=0.25, p_out=0.005)
    h = leiden_hierarchy(nodes, edges)
    check_tree(h, 10, 4)
    assert max(h.levels()) >= 2
    deep = next(m for m in h.modules if m.level == 2)
    chain = h.ancestors(deep.module_id)
    assert [h.module(a).level for a in chain] == [1, 0]
    assert all(set(deep.entities) <= set(h.module(a).entities) for a in chain)
    for name in nodes:
        leaf = h.leaf_module_of(name)
        containing = [m for m in h.modules if name in m.entities]
        if leaf is None:
            assert not containing and name in h.unclustered
        else:
            assert max(containing, key=lambda m: m.level).module_id == leaf
            assert {m.module_id for m in containing} == {leaf, *h.ancestors(leaf)}
    assert sum(h.levels().values()) == len(h.modules)


def test_resolution_and_weights_change_the_partition():
    edges = clique("A", 5) + clique("B", 5) + [("A0", "B0", 1.0)]
    nodes = sorted({n for e in edges for n in e[:2]})
    assert len(leiden_hierarchy(nodes, edges, resolution=0.05).modules) == 1
    heavy = edges[:-1] + [("A0", "B0", 50.0)]  # the bridge outweighs both cliques
    assert [m.entities for m in leiden_hierarchy(nodes, heavy).modules] == [
        ("A1", "A2", "A3", "A4"), ("B1", "B2", "B3", "B4"), ("A0", "B0")]


def test_bad_input_is_a_clear_error():
    with pytest.raises(KgragError, match="not among the nodes"):
        leiden_hierarchy(["A"], [("A", "B", 1.0)])
    with pytest.raises(KgragError, match="positive"):
        leiden_hierarchy(["A", "B"], [("A", "B", 0.0)])
    with pytest.raises(KgragError, match=">= 1"):
        leiden_hierarchy(["A"], [], max_levels=0)
    with pytest.raises(KgragError, match="no module"):
        leiden_hierarchy(["A"], []).ancestors("M1")
