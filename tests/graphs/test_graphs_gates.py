"""Causal gate candidates and top-down hierarchical pruning (HugRAG Alg. 2)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import numpy as np
import pytest

from kgrag.errors import KgragError
from kgrag.graphs.gates import Judge, find_gates, module_adjacency, similarity_judge
from kgrag.graphs.hierarchy import Hierarchy, Module


def each_pair(verdict: Callable[[str, str], bool]) -> Judge:
    """A judge that asks ``verdict(a, b)`` of one pair after another."""
    return lambda pairs: [verdict(a, b) for a, b in pairs]


def build(spec: dict[str, tuple[int, str | None, tuple[str, ...]]]) -> Hierarchy:
    """A hierarchy from {id: (level, parent, entities)}; children derived, in id order."""
    modules = []
    for module_id, (level, parent, entities) in spec.items():
        children = tuple(c for c, (_, p, _) in spec.items() if p == module_id)
        modules.append(Module(module_id, level, parent, children, tuple(sorted(entities))))
    return Hierarchy(modules=modules)


# M1 = {M4, M5}, M2 = {M6, M7}, M3 has no children.
SMALL = build({
    "M1": (0, None, ("a1", "a2", "a3", "a4")),
    "M2": (0, None, ("b1", "b2", "b3", "b4")),
    "M3": (0, None, ("c1", "c2")),
    "M4": (1, "M1", ("a1", "a2")),
    "M5": (1, "M1", ("a3", "a4")),
    "M6": (1, "M2", ("b1", "b2")),
    "M7": (1, "M2", ("b3", "b4")),
})
SAME = {f"M{i}": np.array([1.0, 0.0]) for i in range(1, 8)}


class Recorder:
    """A judge that says yes to the given pairs and records every pair and batch."""

    def __init__(self, yes=()):
        self.yes = {frozenset(p) for p in yes}
        self.calls: list[tuple[str, str]] = []
        self.batches: list[list[tuple[str, str]]] = []

    def __call__(self, pairs: list[tuple[str, str]]) -> list[bool]:
        self.batches.append(pairs)
        self.calls.extend(pairs)
        return [frozenset(p) in self.yes for p in pairs]


def test_ancestor_and_descendant_pairs_are_never_judged():
    judge = Recorder()
    search = find_gates(SMALL, SAME, set(), judge, top_m=10)
    lineage = {("M1", "M4"), ("M1", "M5"), ("M2", "M6"), ("M2", "M7")}
    assert judge.calls and not lineage & set(judge.calls)
    assert search.checks == len(judge.calls) == search.candidates == 3 + 8 + 6
    assert search.skipped_by_pruning == 0 and search.gates == []
    assert search.all_pairs == 7 * 6 // 2


def test_gate_between_parents_prunes_their_children():
    judge = Recorder(yes=[("M1", "M2")])
    search = find_gates(SMALL, SAME, set(), judge, top_m=10)
    assert search.gates == [("M1", "M2")]
    crossing = {("M1", "M6"), ("M1", "M7"), ("M2", "M4"), ("M2", "M5"),
                ("M4", "M6"), ("M4", "M7"), ("M5", "M6"), ("M5", "M7")}
    assert not crossing & set(judge.calls)
    assert search.skipped_by_pruning == 8
    assert search.checks == len(judge.calls) == 17 - 8 == search.candidates - 8
    assert ("M4", "M5") in judge.calls and ("M6", "M7") in judge.calls  # siblings still checked


def test_look_ahead_gate_prunes_the_finer_pairs_it_covers():
    judge = Recorder(yes=[("M1", "M6")])
    search = find_gates(SMALL, SAME, set(), judge, top_m=10)
    assert search.gates == [("M1", "M6")]
    assert ("M2", "M4") in judge.calls  # look-ahead from M2 is not affected
    assert not {("M4", "M6"), ("M5", "M6")} & set(judge.calls)
    assert search.skipped_by_pruning == 2


def test_look_ahead_checks_the_next_level_but_not_own_children():
    judge = Recorder()
    find_gates(SMALL, SAME, set(), judge, top_m=10)
    look_ahead = [(a, b) for a, b in judge.calls if a in {"M1", "M2", "M3"}
                  and b in {"M4", "M5", "M6", "M7"}]
    assert look_ahead == [("M1", "M6"), ("M1", "M7"), ("M2", "M4"), ("M2", "M5"),
                          ("M3", "M4"), ("M3", "M5"), ("M3", "M6"), ("M3", "M7")]


def test_dissimilar_and_adjacent_modules_are_not_candidates():
    vectors = dict(SAME, M3=np.array([0.0, 1.0]))  # orthogonal to every other module
    judge = Recorder()
    search = find_gates(SMALL, vectors, {frozenset(("M6", "M4"))}, judge, top_m=10)
    assert not any("M3" in pair for pair in judge.calls)
    assert ("M4", "M6") not in judge.calls and ("M4", "M7") in judge.calls
    assert search.candidates == search.checks == len(judge.calls)
    by_function = Recorder()
    find_gates(SMALL, vectors, lambda a, b: {a, b} == {"M4", "M6"}, by_function, top_m=10)
    assert by_function.calls == judge.calls


def test_top_m_keeps_only_the_nearest_partners():
    flat = build({"M1": (0, None, ("a", "b")), "M2": (0, None, ("c", "d")),
                  "M3": (0, None, ("e", "f"))})
    vectors = {"M1": np.array([1.0, 0.0]), "M2": np.array([0.9, 0.436]),
               "M3": np.array([0.6, 0.8])}  # cos(1,2)=0.90, cos(2,3)=0.89, cos(1,3)=0.60
    judge = Recorder()
    search = find_gates(flat, vectors, set(), judge, top_m=1)
    assert judge.calls == [("M1", "M2"), ("M2", "M3")] and search.candidates == 2
    # Adjacency does not use up a slot: M1's best eligible partner becomes M3.
    judge = Recorder()
    find_gates(flat, vectors, {frozenset(("M1", "M2"))}, judge, top_m=1)
    assert judge.calls == [("M1", "M3"), ("M2", "M3")]
    # min_similarity cuts M1-M3 (0.60) even when it is M1's only eligible partner.
    judge = Recorder()
    find_gates(flat, vectors, {frozenset(("M1", "M2"))}, judge, top_m=1, min_similarity=0.7)
    assert judge.calls == [("M2", "M3")]


def test_module_adjacency_from_relationships():
    pairs = module_adjacency(SMALL, [("a1", "b3"), ("a1", "a3"), ("c1", "unknown"),
                                     ("a1", "a2")])
    assert pairs == {frozenset(p) for p in [("M4", "M7"), ("M4", "M2"), ("M1", "M7"),
                                            ("M1", "M2"), ("M4", "M5")]}


def test_checks_replay_in_the_same_order():
    first, second = Recorder(yes=[("M1", "M3")]), Recorder(yes=[("M1", "M3")])
    assert find_gates(SMALL, SAME, set(), first, top_m=10) == \
        find_gates(SMALL, SAME, set(), second, top_m=10)
    assert first.calls == second.calls
    assert first.calls[:3] == [("M1", "M2"), ("M1", "M3"), ("M2", "M3")]


def layered(leaves: int, seed: int = 0) -> tuple[Hierarchy, dict[str, np.ndarray]]:
    """leaves/20 level-0 modules, 5 level-1 children each, 4 two-entity leaves each;
    leaf vectors scatter around 8 topics and parents average their children."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(8, 32))
    leaf_vecs = [topics[rng.integers(8)] + 0.6 * rng.normal(size=32) for _ in range(leaves)]
    n0, n1 = leaves // 20, leaves // 4
    ids = iter(f"M{i}" for i in range(1, n0 + n1 + leaves + 1))
    spec, vectors = {}, {}
    top_ids = [next(ids) for _ in range(n0)]
    mid_ids = [next(ids) for _ in range(n1)]
    leaf_ids = [next(ids) for _ in range(leaves)]
    for k, leaf in enumerate(leaf_ids):
        spec[leaf] = (2, mid_ids[k // 4], (f"e{2 * k:05d}", f"e{2 * k + 1:05d}"))
        vectors[leaf] = leaf_vecs[k]
    for j, mid in enumerate(mid_ids):
        kids = leaf_ids[4 * j:4 * j + 4]
        spec[mid] = (1, top_ids[j // 5], tuple(e for c in kids for e in spec[c][2]))
        vectors[mid] = np.mean([vectors[c] for c in kids], axis=0)
    for i, top in enumerate(top_ids):
        kids = mid_ids[5 * i:5 * i + 5]
        spec[top] = (0, None, tuple(e for c in kids for e in spec[c][2]))
        vectors[top] = np.mean([vectors[c] for c in kids], axis=0)
    return build(dict(sorted(spec.items(), key=lambda kv: int(kv[0][1:])))), vectors


def test_checks_grow_linearly_while_all_pairs_grow_quadratically():
    def judge(a: str, b: str) -> bool:
        return random.Random(f"{a}|{b}").random() < 0.3

    results = []
    for leaves in (20, 80, 320):
        hierarchy, vectors = layered(leaves)
        n = len(hierarchy.modules)
        search = find_gates(hierarchy, vectors, set(), each_pair(judge))
        assert search.all_pairs == n * (n - 1) // 2
        assert search.checks + search.skipped_by_pruning == search.candidates
        assert 0 < search.checks <= 3 * 3 * n  # 3 compared sets per module, top_m = 3
        results.append((n, search))
    # Candidates are capped at top_m * (|X| + |Y|) per compared set, so checks per
    # module stay below 9 at every size while exhaustive pairs per module grow as N/2.
    (n_small, small), _, (n_big, big) = results
    assert big.all_pairs / small.all_pairs > 0.8 * (n_big / n_small) ** 2
    assert big.all_pairs / n_big > 200 and big.checks / n_big < 9
    assert big.checks * 10 < big.all_pairs
    assert big.skipped_by_pruning > 0 and big.gates


def test_empty_hierarchy_and_missing_vectors():
    empty = find_gates(Hierarchy(modules=[]), {}, set(), Recorder())
    assert (empty.gates, empty.checks, empty.candidates, empty.all_pairs) == ([], 0, 0, 0)
    with pytest.raises(KgragError, match="no summary vector"):
        find_gates(SMALL, {"M1": np.ones(2)}, set(), Recorder())
    with pytest.raises(KgragError, match="top_m"):
        find_gates(SMALL, SAME, set(), Recorder(), top_m=-1)


def test_the_similarity_judge_says_yes_from_its_threshold_up():
    vectors = {"M1": np.array([1.0, 0.0]), "M2": np.array([0.8, 0.6]),
               "M3": np.array([0.0, 2.0])}  # cosines: M1-M2 0.8, M1-M3 0, M2-M3 0.6
    judge = similarity_judge(vectors, 0.8)
    assert judge("M1", "M2") and judge("M2", "M1")
    assert not judge("M1", "M3") and not judge("M2", "M3")
    assert similarity_judge(vectors, 0.6)("M2", "M3")


def test_a_similarity_judge_gates_only_the_closest_candidates():
    vectors = {"M1": np.array([1.0, 0.0]), "M2": np.array([0.8, 0.6]),
               "M3": np.array([0.6, 0.8])}
    flat = build({"M1": (0, None, ("a", "b")), "M2": (0, None, ("c", "d")),
                  "M3": (0, None, ("e", "f"))})
    search = find_gates(flat, vectors, set(), each_pair(similarity_judge(vectors, 0.9)), top_m=2,
                        min_similarity=0.5)
    # three candidates (M1-M3 at 0.6 included), one close enough to be a gate (0.96)
    assert search.checks == search.candidates == 3
    assert search.gates == [("M2", "M3")]


def test_no_pair_of_a_batch_could_have_been_pruned_by_an_earlier_one():
    """Judging a compared set's pairs at once (an executor's batch) skips exactly what
    judging them one after another would: no verdict within a batch covers another."""
    hierarchy, vectors = layered(320)
    judge = Recorder(yes=[p for p in itertools.combinations(sorted(vectors), 2)
                          if random.Random("|".join(p)).random() < 0.3])
    search = find_gates(hierarchy, vectors, set(), judge)
    lineage = {m: {m, *hierarchy.ancestors(m)} for m in vectors}
    for batch in judge.batches:
        gated = [frozenset(p) for p in batch if frozenset(p) in judge.yes]
        for a, b in batch:
            covers = {frozenset((x, y)) for x in lineage[a] for y in lineage[b] if x != y}
            assert not covers - {frozenset((a, b))} & set(gated)
    assert len(judge.batches) > 2 and search.skipped_by_pruning > 0 and search.gates
