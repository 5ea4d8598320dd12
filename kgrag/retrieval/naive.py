"""Strategy ``naive``: dense top-k chunks, filled greedily up to the token budget."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.retrieval.budget import fill_budget
from kgrag.retrieval.units import Units
from kgrag.store.vectors import VectorTable

DENSE_TABLE = "chunks"


class NaiveStrategy:
    """The dense baseline every graph method must beat at the same budget."""

    needs = ("chunks", "dense")

    def __init__(self, table: VectorTable, units: Units, top_k: int | None, budget: int) -> None:
        self.table, self.units, self.budget = table, units, budget
        if top_k is None:
            # Enough candidates to fill the budget twice over with typical units.
            typical = max(1, int(statistics.median(units.tokens.values())))
            top_k = 2 * math.ceil(budget / typical) + 10
        self.top_k = min(top_k, len(units.tokens))

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], units: Units
             ) -> NaiveStrategy:
        return cls(VectorTable.open(artefacts["dense"], DENSE_TABLE), units,
                   config["top_k"], config["budget_tokens"])

    def retrieve(self, question: str, vector: np.ndarray) -> list[str]:
        ranked = [unit for unit, _ in self.table.search(vector, self.top_k)]
        return fill_budget(ranked, self.units.tokens, self.budget)
