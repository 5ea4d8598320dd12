"""Greedy filling of a token budget, shared by every strategy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def fill_budget(ranked: Iterable[str], tokens: Mapping[str, int], budget: int) -> list[str]:
    """Take units in rank order while they fit; a unit too large for what is left is
    skipped (a later, smaller one may still fit)."""
    chosen, used = [], 0
    for unit in ranked:
        size = tokens[unit]
        if used + size <= budget:
            chosen.append(unit)
            used += size
    return chosen
