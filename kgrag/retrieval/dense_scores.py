"""A question's dense similarities as the PPR search reads them: every chunk's, or,
when the dense artefact carries an ANN index, only the nearest chunks' from its search.

The walk reads them four ways: the dense seed chunks (the best few, weighted by their
min–max normalised similarity), the order among chunks whose mass ties, the chunks
without mass (they follow in dense order), and the whole ranking that fusion and
KET-RAG's skeleton channel read. Without an index (``Flat``) one product with the chunk
matrix gives every chunk's similarity: at a million chunks about 310 ms a question, most
of the ppr query. With an index (``Nearest``) the search's nearest chunks stand in for
every chunk, their similarity computed exactly from their rows (as is that of the
chunks the walk gave mass), so no question scans every chunk. The dense seeds' min–max
normalisation needs the least similar chunk of all: the index finds it as the chunk
nearest the question's opposite vector (the largest cosine to −q is the smallest to q),
one more search. Its deviations, besides the index's own approximation: the whole
ranking ends with the chunks searched; a context's fill searches further (twice as many
chunks each time) only while it takes every chunk searched and leaves some of the
budget, so once a searched chunk no longer fits what is left, the smaller chunks beyond
the search are not looked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kgrag.contents.dense import MatrixRows
from kgrag.retrieval.budget import LazyRanking, best, filled_best
from kgrag.store.vectors import VectorTable

# Chunks a question's first index search returns: a budget of a few thousand tokens
# takes a few dozen chunks, and most of a ppr context comes from the chunks with mass.
FIRST_SEARCH = 64


def seed_weights(similarity: np.ndarray, n: int, lowest: np.floating
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best of ``similarity`` (indices, best first, ties in index order) and
    their similarity min–max normalised, ``lowest`` the minimum (every chunk's)."""
    top = best(similarity, np.arange(len(similarity)), n)[0]
    spread = similarity.max() - lowest
    weights = (similarity[top] - lowest) / spread if spread > 0 else np.ones(len(top))
    return top, weights


@dataclass(frozen=True)
class Flat:
    """Every chunk's similarity, by its position in the graph's chunk block."""

    similarity: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.similarity.nbytes

    def of(self, positions: np.ndarray) -> np.ndarray:
        return self.similarity[positions]

    def seeds(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` nearest chunks (positions) and their dense seed weights."""
        return seed_weights(self.similarity, n, self.similarity.min())

    def nearest(self, n: int) -> np.ndarray:
        """The positions of the ``n`` chunks nearest the question."""
        return best(self.similarity, np.arange(len(self.similarity)), n)[0]

    def order(self) -> np.ndarray:
        """Every chunk's position, nearest first (ties in position order)."""
        return np.argsort(-self.similarity, kind="stable")

    def reading(self, head: list[str], held: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
                position: Mapping[str, int]) -> LazyRanking:
        """``head`` (the chunks ``held``, named), then every other chunk nearest first,
        sorted only as far as it is read."""
        pool = np.ones(len(self.similarity), dtype=bool)
        pool[held] = False
        return LazyRanking(head, self.similarity, np.flatnonzero(pool), ids, sizes, position)

    def fill(self, held: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
             tokens: Mapping[str, int], budget: int) -> list[str]:
        """``filled_best`` of the chunks not in ``held``, nearest first."""
        pool = np.ones(len(self.similarity), dtype=bool)
        pool[held] = False
        return filled_best(self.similarity, np.flatnonzero(pool), ids, sizes, tokens, budget)


@dataclass(frozen=True)
class Nearest:
    """The similarity of the chunks an index search returned for ``vector`` (positions
    ascending, each similarity from the chunk's row), and how to search further."""

    index: VectorTable
    matrix: MatrixRows
    position: Mapping[str, int]
    vector: np.ndarray
    positions: np.ndarray
    similarity: np.ndarray
    complete: bool  # every chunk the index can return was returned

    @classmethod
    def search(cls, index: VectorTable, matrix: MatrixRows, position: Mapping[str, int],
               vector: np.ndarray, k: int) -> Nearest:
        """The ``k`` chunks nearest ``vector`` by the index, with exact similarities."""
        found = index.search(vector, k)
        positions = np.sort(np.array([position[chunk] for chunk, _ in found], dtype=np.int64))
        return cls(index, matrix, position, vector, positions, matrix.dot(positions, vector),
                   len(found) < k or k >= len(matrix))

    @property
    def nbytes(self) -> int:
        return self.positions.nbytes + self.similarity.nbytes

    def of(self, positions: np.ndarray) -> np.ndarray:
        """The similarity of any chunks, from their rows (the chunks the walk reached)."""
        return self.matrix.dot(positions, self.vector)

    def seeds(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` nearest chunks searched and their dense seed weights, normalised by
        the least similarity of all: that of the chunk the index finds nearest the
        opposite of the question (one more search, made only where dense seeds are)."""
        farthest = [self.position[chunk] for chunk, _ in self.index.search(-self.vector, 1)]
        lowest = min(self.similarity.min(), *self.matrix.dot(np.array(farthest), self.vector))
        top, weights = seed_weights(self.similarity, n, lowest)
        return self.positions[top], weights

    def nearest(self, n: int) -> np.ndarray:
        """The positions of the ``n`` chunks nearest the question among those searched
        (the search asked for at least ``n``)."""
        return self.positions[best(self.similarity, np.arange(len(self.similarity)), n)[0]]

    def order(self) -> np.ndarray:
        """The searched chunks' positions, nearest first (ties in position order)."""
        return self.positions[np.argsort(-self.similarity, kind="stable")]

    def reading(self, head: list[str], held: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
                position: Mapping[str, int]) -> LazyRanking:
        """``head`` (the chunks ``held``, named), then the other searched chunks nearest
        first: a short ranking, given whole."""
        order = self.order()
        return LazyRanking(head + ids[order[~np.isin(order, held)]].tolist())

    def fill(self, held: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
             tokens: Mapping[str, int], budget: int) -> list[str]:
        """``filled_best`` of the searched chunks not in ``held``; while it takes every
        one of them and leaves some of the budget, searched again for twice as many."""
        searched = self
        while True:
            pool = np.flatnonzero(~np.isin(searched.positions, held))
            chosen = filled_best(searched.similarity, pool, ids[searched.positions],
                                 sizes[searched.positions], tokens, budget)
            left = budget - sum(tokens[chunk] for chunk in chosen)
            if searched.complete or len(chosen) < len(pool) or left <= 0:
                return chosen
            searched = Nearest.search(self.index, self.matrix, self.position, self.vector,
                                      2 * len(searched.positions))


DenseScores = Flat | Nearest
