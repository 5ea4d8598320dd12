"""Strategy ``knng``: KNNG-RAG, dense seed chunks each followed by its KNN-graph neighbours.

The baseline asks whether the LLM-free chunk graph that KET-RAG builds to pick its
core chunks is, by itself, a useful retrieval graph. Seeds are naive's dense
ranking (same ``top_k`` rule), so the two differ only by the neighbours.

Budget split, which the paper leaves open: there is no fixed share. The list seed 1,
its neighbours, seed 2, its neighbours, … (each chunk at its first place only)
fills the budget greedily, exactly as naive fills its list, so neighbours take
budget from lower-ranked seeds. That is the method's bet: that the graph
neighbours of a good chunk are worth more than the next dense hit. A seed too
large for what is left is skipped but its neighbours are still considered, as any
later unit is. The graph is unweighted, so a seed's neighbours come in descending
cosine to the question, ties by chunk id.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.contents.core import read_knn
from kgrag.contents.dense import dense_matrix, open_dense
from kgrag.declarations import Config, GraphRef, Need, Strategy
from kgrag.errors import KgragError
from kgrag.retrieval.local_search import natural_key
from kgrag.retrieval.naive import NaiveStrategy
from kgrag.retrieval.params import SKELETON, TOP_K
from kgrag.retrieval.units import Evidence, Units

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources


class KnngStrategy:
    """Dense seeds, each followed by its neighbours in the KNN chunk graph."""

    def __init__(self, dense: NaiveStrategy, chunk_ids: list[str], matrix: np.ndarray,
                 neighbours: dict[str, list[str]], units: Units, budget: int) -> None:
        self.dense, self.matrix, self.neighbours = dense, matrix, neighbours
        self.row = {chunk: i for i, chunk in enumerate(chunk_ids)}
        self.units, self.budget = units, budget

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> KnngStrategy:
        units, budget = resources.chunks, config["budget_tokens"]
        table = open_dense(artefacts["dense"])
        dense = NaiveStrategy(table, units, config["top_k"], budget)
        chunk_ids, matrix = dense_matrix(artefacts["dense"])
        edges = read_knn(artefacts["knn"])
        unknown = set(edges["source"].to_list() + edges["target"].to_list()) - units.text.keys()
        if unknown:
            raise KgragError(f"the KNN graph in {artefacts['knn']} links {len(unknown)} chunks "
                             f"that are not in the corpus chunks (e.g. {min(unknown)!r})")
        neighbours: dict[str, list[str]] = {}
        for source, target in zip(edges["source"].to_list(), edges["target"].to_list()):
            neighbours.setdefault(source, []).append(target)
        for chunk, linked in neighbours.items():
            neighbours[chunk] = sorted(set(linked), key=natural_key)
        return cls(dense, chunk_ids, matrix, neighbours, units, budget)

    def ranked(self, vector: np.ndarray) -> list[str]:
        """Seeds in dense order, each followed by its not yet listed neighbours."""
        similarity = self.matrix @ vector.astype(np.float32)
        listed: dict[str, None] = {}
        for seed in self.dense.ranked(vector):
            listed.setdefault(seed)
            for chunk in sorted(self.neighbours.get(seed, ()),
                                key=lambda c: -similarity[self.row[c]]):
                listed.setdefault(chunk)
        return list(listed)

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        return self.units.filled(self.ranked(vector), self.budget)


def _needs(config: Config) -> dict[str, Need]:
    return {"dense": "dense",
            "knn": GraphRef("skeleton", "core", "knng walks a skeleton's KNN chunk graph")}


DECLARATION = Strategy("knng", "dense seeds plus their KNN-graph neighbours.",
                       (TOP_K, SKELETON), KnngStrategy, _needs)
