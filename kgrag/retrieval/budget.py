"""Greedy filling of a token budget, shared by every strategy, and the same fill from
scores sorted only as far as it reads them (``filled_best``: BM25's context, ppr's;
``LazyRanking``: a ranking that fusion reads only as deep as it must)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import TypeVar

import numpy as np

Unit = TypeVar("Unit", bound=Hashable)  # a chunk's id, a triple: whatever has a size

# Units sorted by the first block of a budget fill: about three budgets of 1,000 tokens of
# musique's chunks (110 tokens on average); a fill that reads past it sorts a block twice
# as large, and so on.
FIRST_BLOCK = 32


def fill_budget(ranked: Iterable[Unit], tokens: Mapping[Unit, int], budget: int) -> list[Unit]:
    """Take units in rank order while they fit; a unit too large for what is left is
    skipped (a later, smaller one may still fit)."""
    chosen: list[Unit] = []
    used = 0
    for unit in ranked:
        size = tokens[unit]
        if used + size <= budget:
            chosen.append(unit)
            used += size
    return chosen


def best(scores: np.ndarray, pool: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best units of ``pool`` (positions in ascending order) in rank order,
    scores descending and ties in position order, and the rest of ``pool`` (ascending).
    Only those n are sorted: a partition finds the n-th best score, and of the units
    that tie with it the first in position order are kept, as a stable sort of every
    score would keep them."""
    if pool.size <= n:
        top, rest = pool, pool[:0]
    else:
        pooled = scores[pool]
        nth = np.partition(pooled, pool.size - n)[pool.size - n]
        kept = pooled > nth
        kept[np.flatnonzero(pooled == nth)[: n - np.count_nonzero(kept)]] = True
        top, rest = pool[kept], pool[~kept]
    return top[np.argsort(-scores[top], kind="stable")], rest


def filled_best(scores: np.ndarray, pool: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
                tokens: Mapping[str, int], budget: int) -> list[str]:
    """What ``fill_budget`` takes into ``budget`` from the units of ``pool`` (positions,
    ascending) ranked by ``scores`` descending, ties in position order (a stable sort),
    named by ``ids`` and sized by ``sizes`` (``tokens`` by position), the ranking sorted
    block by block as the fill reads it. A unit larger than what is left of the budget
    is skipped and would be skipped later too (what is left only shrinks), so before
    each block the units not yet read are cut to those that still fit: once the best
    few are taken, only the rare small units remain to be sorted, not the whole ranking
    that the fill would read to its end."""
    ranking = LazyRanking([], scores, pool, ids, sizes)
    return fill_as_read(lambda room: ranking.after(0, room), tokens, budget)


def fill_as_read(read: Callable[[Callable[[], float]], Iterable[Unit]],
                 tokens: Mapping[Unit, int], budget: int) -> list[Unit]:
    """What ``fill_budget`` takes into ``budget`` from the ranking ``read(room)`` yields,
    ``room()`` being what is left of the budget as it is read: a ranking read lazily may
    leave out what no longer fits."""
    chosen: list[Unit] = []
    left = budget

    def room() -> float:
        return left

    for unit in read(room):
        size = tokens[unit]
        if size <= left:
            chosen.append(unit)
            left -= size
    return chosen


def preceding(scores: np.ndarray, pool: np.ndarray, ats: np.ndarray) -> np.ndarray:
    """For each unit of ``ats`` (positions in ``pool``), how many units of ``pool`` come
    before it in ``best``'s order: a higher score, or an equal one at an earlier position.
    One pass over the pool for all of them: each pooled score is placed among the asked
    scores (a search in a few dozen), and only the pooled units that tie with an asked
    score are compared by position."""
    pooled = scores[pool]
    levels = np.unique(scores[ats])
    below = np.searchsorted(levels, pooled)  # the asked scores under each pooled one
    above = np.bincount(below, minlength=levels.size + 1)[::-1].cumsum()[::-1]
    level = np.searchsorted(levels, scores[ats])
    tied = np.flatnonzero(levels[np.minimum(below, levels.size - 1)] == pooled)
    tied_level, tied_at = below[tied], pool[tied]
    earlier = [np.count_nonzero((tied_level == j) & (tied_at < at))
               for j, at in zip(level.tolist(), ats.tolist())]
    return above[level + 1] + np.array(earlier, dtype=np.int64)


class LazyRanking:
    """A ranking sorted only as far as it is read: ``head`` (ids already in rank order),
    then the units of ``pool`` (positions, ascending) by ``scores`` descending, ties in
    position order (a stable sort), named by ``ids``, sized by ``sizes`` and found by
    ``position`` (id → position). Fusion reads its members' rankings through it: their
    first units, the rank of any unit it has met in another member, and the rest once
    one member's order alone decides (``kgrag.retrieval.fusion``). A ranking given whole
    is a head alone."""

    def __init__(self, head: list[str], scores: np.ndarray | None = None,
                 pool: np.ndarray | None = None, ids: np.ndarray | None = None,
                 sizes: np.ndarray | None = None, position: Mapping[str, int] | None = None
                 ) -> None:
        self.read = list(head)
        self.rank = {unit: rank for rank, unit in enumerate(self.read, start=1)}
        self.scores = np.zeros(0) if scores is None else scores
        self.pool = np.arange(0) if pool is None else pool
        self.ids = np.zeros(0, dtype=object) if ids is None else ids
        self.sizes = np.zeros(0, dtype=np.int64) if sizes is None else sizes
        self.position = position or {}

    def first(self, n: int) -> list[str]:
        """The ranking's first ``n`` units (all of it when it is shorter), sorting from
        the pool only the units that ``n`` reaches past those already read."""
        if len(self.read) < n and self.pool.size:
            top, self.pool = best(self.scores, self.pool, n - len(self.read))
            for unit in self.ids[top].tolist():
                self.read.append(unit)
                self.rank[unit] = len(self.read)
        return self.read[:n]

    def ends_within(self, n: int) -> bool:
        """Whether ``first(n)`` is the whole ranking."""
        return not self.pool.size and len(self.read) <= n

    def ranks(self, units: list[str]) -> list[int | None]:
        """Each unit's rank (from 1), None for a unit the ranking does not hold. A unit
        still in the pool is not sorted: its rank is counted (``preceding``)."""
        found = [self.rank.get(unit) for unit in units]
        asked = [i for i, rank in enumerate(found) if rank is None and units[i] in self.position]
        if asked and self.pool.size:
            ats = np.array([self.position[units[i]] for i in asked])
            slot = np.minimum(np.searchsorted(self.pool, ats), self.pool.size - 1)
            pooled = self.pool[slot] == ats  # the pool is in position order
            if pooled.any():
                ahead = preceding(self.scores, self.pool, ats[pooled])
                for i, before in zip(np.array(asked)[pooled].tolist(), ahead.tolist()):
                    found[i] = len(self.read) + 1 + before
        return found

    def after(self, n: int, room: Callable[[], float]) -> Iterator[str]:
        """The ranking after its first ``n`` units, the pool sorted block by block as it
        is read, each block cut first to the units no larger than ``room()`` (what is
        left of a budget: it only shrinks, so a unit cut would have been skipped). It is
        read once: what it sorts leaves the pool without being kept."""
        yield from self.read[n:]
        block = FIRST_BLOCK
        while self.pool.size:
            top, self.pool = best(self.scores, self.pool[self.sizes[self.pool] <= room()],
                                  block)
            yield from self.ids[top].tolist()
            block *= 2
