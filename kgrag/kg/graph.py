"""The knowledge graph of a KGQA corpus, as index arrays, and each question's retrieval
graph: the k-hop neighbourhood of its topic entities.

Entities and relations are numbered in order of first appearance; triple ``i`` is
``(head[i], relation[i], tail[i])``. The k-hop neighbourhood grows from the topic
entities along triples in either direction: hop 1 is every triple touching a topic
entity, hop 2 every triple touching an entity hop 1 reached, and so on. The graph is
readable with networkx (``networkx()``) and written as GraphML (``write_graphml``),
which igraph reads too (``igraph.Graph.Read_GraphML``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

TEXTLESS = re.compile(r"[mg]\.[0-9a-z_]+")  # Freebase ids of unnamed nodes (CVTs)


def textless(name: str) -> bool:
    """Whether an entity has no usable name (a Freebase ``m.``/``g.`` id)."""
    return TEXTLESS.fullmatch(name) is not None


class KnowledgeGraph:
    """Triples as index arrays into entity and relation names."""

    def __init__(self, ids: Collection[str], heads: Collection[str],
                 relations: Collection[str], tails: Collection[str]) -> None:
        self.ids = list(ids)
        self.entity_index: dict[str, int] = {}
        self.relation_index: dict[str, int] = {}
        for name in (*heads, *tails):
            self.entity_index.setdefault(name, len(self.entity_index))
        for name in relations:
            self.relation_index.setdefault(name, len(self.relation_index))
        self.entities = list(self.entity_index)
        self.relations = list(self.relation_index)
        self.head = np.array([self.entity_index[h] for h in heads], dtype=np.int64)
        self.relation = np.array([self.relation_index[r] for r in relations], dtype=np.int64)
        self.tail = np.array([self.entity_index[t] for t in tails], dtype=np.int64)
        self.touching: list[list[int]] = [[] for _ in self.entities]  # entity → its triples
        for i, (h, t) in enumerate(zip(self.head, self.tail)):
            self.touching[h].append(i)
            if t != h:
                self.touching[t].append(i)

    def triple(self, i: int) -> tuple[str, str, str]:
        return (self.entities[self.head[i]], self.relations[self.relation[i]],
                self.entities[self.tail[i]])

    def layers(self, seeds: Iterable[int], hops: int) -> list[list[int]]:
        """The triples first reached at each hop from the seed entities (hop 1 first),
        each hop's in graph order."""
        frontier, reached = set(seeds), set(seeds)
        triples: set[int] = set()
        found = []
        for _ in range(hops):
            new = {i for e in frontier for i in self.touching[e]} - triples
            triples |= new
            found.append(sorted(new))
            frontier = {int(x) for i in new for x in (self.head[i], self.tail[i])} - reached
            reached |= frontier
        return found

    def neighbourhood(self, seeds: Iterable[int], hops: int) -> np.ndarray:
        """The triples within ``hops`` of the seed entities, in graph order."""
        return np.array(sorted(i for layer in self.layers(seeds, hops) for i in layer),
                        dtype=np.int64)

    def networkx(self, triples: Iterable[int] | None = None) -> nx.MultiDiGraph:
        """The graph (or the given triples of it) with entity names as nodes and one edge
        per triple, keyed by its id and carrying its relation."""
        import networkx as nx  # imported by the few steps that make a graph, not by every command

        graph = nx.MultiDiGraph()
        for i in range(len(self.ids)) if triples is None else triples:
            h, r, t = self.triple(int(i))
            graph.add_edge(h, t, key=self.ids[i], relation=r)
        return graph

    def write_graphml(self, path: Path) -> None:
        import networkx as nx

        nx.write_graphml(self.networkx(), path)


def with_distractors(own: Sequence[int], others: Iterable[Sequence[int]], size: int
                     ) -> np.ndarray:
    """A retrieval graph padded to ``size`` triples with distractors, in graph order: the
    triples of ``others`` (other questions' retrieval graphs, each listed nearest its own
    topic entities first, the graphs in the order given), taken whole, the last one cut at
    ``size``; a graph already that large is kept as it is."""
    kept = dict.fromkeys(int(i) for i in own)
    for graph in others:
        if len(kept) >= size:
            break
        for i in graph:
            kept.setdefault(int(i))
            if len(kept) >= size:
                break
    return np.array(sorted(kept), dtype=np.int64)
