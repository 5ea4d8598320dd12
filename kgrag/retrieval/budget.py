"""Greedy filling of a token budget, shared by every strategy, and the same fill from
scores sorted only as far as it reads them (``filled_best``: BM25's context, ppr's)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
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
    chosen: list[str] = []
    left, block = budget, FIRST_BLOCK
    while pool.size:
        top, pool = best(scores, pool[sizes[pool] <= left], block)
        taken = fill_budget(ids[top].tolist(), tokens, left)
        chosen += taken
        left -= sum(tokens[unit] for unit in taken)
        block *= 2
    return chosen
