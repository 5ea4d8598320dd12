"""Greedy filling of a token budget, shared by every strategy."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

Unit = TypeVar("Unit", bound=Hashable)  # a chunk's id, a triple: whatever has a size


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
