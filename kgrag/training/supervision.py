"""ReG's weak supervision and candidate pool (steps 1 to 3 of the paper).

Weak labels (SubgraphRAG's rule): for each (topic entity, answer) pair, every shortest
path in the question's retrieval graph forward (topic → answer) and backward (answer →
topic), keeping only the shorter direction's when both exist; each consecutive entity
pair maps back to every triple joining it in that direction. The weak label set is the
union of the triples on those paths; a question with no path has none (skipped and
counted by the step).

Candidate pool P = P_sp ∪ P_q ∪ P_a: the shortest paths, each topic entity's one-hop
triples and each answer's one-hop triples (the answer-centric neighbourhood), every
triple a one-step path. Complexity control: one representative answer a* (the answer
whose shortest paths are shortest, then most numerous, then first in gold order) keeps
its paths and its neighbourhood, and paths with the same relation sequence merge into
one candidate, shown as its first member; a selected candidate stands for the triples
of all its members.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgrag.kg.graph import KnowledgeGraph

if TYPE_CHECKING:
    import networkx as nx

MAX_EXPANSIONS = 64  # triple paths one entity path expands to (parallel relations multiply)


@dataclass(frozen=True)
class Candidate:
    """One candidate path of the pool: the triples it shows (in chain order, graph row
    numbers), where it comes from ("sp", "q" or "a") and the triples of every path merged
    into it."""

    path: tuple[int, ...]
    source: str
    members: frozenset[int]


@dataclass(frozen=True)
class Supervision:
    """One training question's weak labels and candidate pool."""

    weak: frozenset[int]
    candidates: tuple[Candidate, ...]
    pool_before: int  # distinct paths in P before answer and relation-chain merging
    answer: int | None  # a*, the representative answer (entity number)


def _digraph(kg: KnowledgeGraph, triples: Iterable[int]) -> nx.MultiDiGraph:
    import networkx as nx  # imported when supervision is built, not by every command

    graph = nx.MultiDiGraph()
    for i in triples:
        graph.add_edge(int(kg.head[i]), int(kg.tail[i]), key=int(i))
    return graph


def _expand(graph: nx.MultiDiGraph, nodes: Sequence[int]) -> list[tuple[int, ...]]:
    """The triple paths along an entity path (every parallel triple between each pair)."""
    steps = [list(graph[u][v]) for u, v in itertools.pairwise(nodes)]
    return list(itertools.islice(itertools.product(*steps), MAX_EXPANSIONS))


def shortest_paths(graph: nx.MultiDiGraph, source: int, target: int) -> list[tuple[int, ...]]:
    """Every shortest triple path between two entities, forward or backward, the shorter
    direction's only when both have one."""
    import networkx as nx

    found = []
    for a, b in ((source, target), (target, source)):
        if a in graph and b in graph and a != b and nx.has_path(graph, a, b):
            found += [p for nodes in nx.all_shortest_paths(graph, a, b)
                      for p in _expand(graph, nodes)]
    if not found:
        return []
    shortest = min(map(len, found))
    return list(dict.fromkeys(p for p in found if len(p) == shortest))


def supervise(kg: KnowledgeGraph, triples: Collection[int], topics: Collection[int],
              answers: Sequence[str]) -> Supervision:
    """Weak labels and the merged candidate pool of one question."""
    graph = _digraph(kg, triples)
    answer_ids = [kg.entity_index[a] for a in answers if a in kg.entity_index]
    paths: dict[int, list[tuple[int, ...]]] = {}
    for answer in answer_ids:
        paths[answer] = [p for topic in topics
                         for p in shortest_paths(graph, int(topic), answer)]
    weak = frozenset(i for found in paths.values() for p in found for i in p)
    reached = [a for a in answer_ids if paths[a]]
    in_graph = {int(i) for i in triples}

    def one_hop(entity: int) -> list[tuple[int, ...]]:
        return [(i,) for i in kg.touching[entity] if i in in_graph]

    near_topics = [p for topic in topics for p in one_hop(int(topic))]
    before = {p for found in paths.values() for p in found}
    before |= set(near_topics) | {p for a in answer_ids for p in one_hop(a)}
    if not reached:
        return Supervision(weak, (), len(before), None)
    best = min(reached, key=lambda a: (min(map(len, paths[a])), -len(paths[a]),
                                       answer_ids.index(a)))
    merged: dict[tuple[int, ...], tuple[tuple[int, ...], str, set[int]]] = {}
    for source, found in (("sp", paths[best]), ("q", near_topics), ("a", one_hop(best))):
        for path in found:
            chain = tuple(int(kg.relation[i]) for i in path)
            _shown, _origin, members = merged.setdefault(chain, (path, source, set()))
            members.update(path)
    candidates = tuple(Candidate(path, source, frozenset(members))
                       for path, source, members in merged.values())
    return Supervision(weak, candidates, len(before), best)


def path_text(kg: KnowledgeGraph, path: Sequence[int]) -> str:
    """A path as ReG writes it: ``h1 → [r1] → t1 → [r2] → t2 …`` (every path of the pool
    runs head to tail, the backward ones from the answer)."""
    parts = [kg.entities[kg.head[path[0]]]]
    for i in path:
        parts += [f"→ [{kg.relations[kg.relation[i]]}] →", kg.entities[kg.tail[i]]]
    return " ".join(parts)
