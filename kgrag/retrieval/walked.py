"""A question's PPR walk as the rankings drawn from it read it, and the memo of walks a
search keeps so that strategies sharing one search walk a question once.

Strategies that share a ``PprSearch`` (the budgets of a sweep, a fusion member and the
ppr row itself, RAS's sub-queries) ask it for the same question's walk again. The memo
used to keep every walk of the run: at a million chunks one held every chunk's dense
similarity (4 MB of float32) and, through a slice, every node's mass (about 75 MB:
9 nodes a chunk), so a run of 1,000 questions could not fit in memory. Now a walk keeps
only what its rankings read (the similarities, and the chunks with mass and their mass,
not every node's), and the memo holds at most ``WALK_MEMO_BYTES`` of walks, the least
recently used evicted first. A walk asked for again after its eviction is walked again:
the walk is deterministic, so every ranking, context and trace is the same. With an ANN
index on the dense artefact a walk keeps only the searched chunks' similarities
(``kgrag.retrieval.dense_scores.Nearest``), a few hundred bytes instead of 4 MB.

The trade, by order: ``retrieve`` runs one strategy over every question, then the next
strategy (a sweep's next budget, a fusion) over every question. While every question's
walk fits (about 30 KB a question at 7,000 chunks with the push walk: all of 1,000 do),
each is walked once and shared. Past the bound (about 4 MB a question at a million
chunks: 128 questions) the next strategy finds its first questions evicted and walks
every question again: one walk a question per strategy, memory bounded, at scale.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kgrag.retrieval.dense_scores import DenseScores

WALK_MEMO_BYTES = 512 * 2**20  # walks a search keeps: 128 push walks at a million chunks


@dataclass(frozen=True)
class Walked:
    """What a question's walk leaves for the rankings drawn from it: the question's dense
    similarities (every chunk's, or the nearest chunks' through an index), the chunks
    with mass best first (by mass, ties in dense order) and their mass (None when no
    seed linked: the dense ranking), and the trace."""

    dense: DenseScores
    held: np.ndarray
    mass: np.ndarray | None
    trace: dict[str, Any]

    @property
    def nbytes(self) -> int:
        """The bytes of its arrays (the trace, a few dozen names, is not counted)."""
        return self.dense.nbytes + self.held.nbytes + (
            0 if self.mass is None else self.mass.nbytes)


class WalkMemo:
    """Walks by (question, vector), at most ``limit`` bytes of them (the walks' arrays and
    their keys), least recently used evicted first; a walk larger than ``limit`` is
    returned and not kept."""

    def __init__(self, limit: int = WALK_MEMO_BYTES) -> None:
        self.limit, self.nbytes, self.evictions = limit, 0, 0
        self.walks: OrderedDict[tuple[str, bytes], tuple[Walked, int]] = OrderedDict()

    def get(self, question: str, vector: np.ndarray, walk: Callable[[], Walked]) -> Walked:
        """The question's walk, kept from before or ``walk()``ed now."""
        key = (question, vector.tobytes())
        if key in self.walks:
            self.walks.move_to_end(key)
            return self.walks[key][0]
        walked = walk()
        size = walked.nbytes + len(key[0].encode()) + len(key[1])
        if size <= self.limit:
            while self.nbytes + size > self.limit:
                self.nbytes -= self.walks.popitem(last=False)[1][1]
                self.evictions += 1
            self.walks[key] = walked, size
            self.nbytes += size
        return walked

    def clear(self) -> None:
        """Forget every walk (a benchmark timing a question's first walk)."""
        self.walks.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.walks)


class ChunkMass(Mapping[str, float]):
    """Each chunk with PPR mass → its mass, in ranking order, read where asked: a
    question's retrieval reads the few chunks in its budget, and a dict of every chunk
    the walk reached cost a question more than the walk itself at a million chunks."""

    def __init__(self, position: dict[str, int], chunk_ids: np.ndarray, held: np.ndarray,
                 mass: np.ndarray) -> None:
        self.position, self.chunk_ids, self.held, self.mass = position, chunk_ids, held, mass

    @functools.cached_property
    def by_position(self) -> np.ndarray:
        """Every chunk's mass by its position, zero where the walk left none (built on the
        first read: a ranking read only for its order never builds it)."""
        every = np.zeros(len(self.position))
        every[self.held] = self.mass
        return every

    def __getitem__(self, chunk: str) -> float:
        mass = self.by_position[self.position[chunk]]
        if not mass > 0:
            raise KeyError(chunk)
        return float(mass)

    def __iter__(self) -> Iterator[str]:
        return iter(self.chunk_ids[self.held].tolist())

    def __len__(self) -> int:
        return len(self.held)
