"""Strategy ``naive``: dense top-k chunks, filled greedily up to the token budget."""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.contents.dense import open_dense
from kgrag.declarations import Param, Strategy
from kgrag.limits import PLAIN_TEXT
from kgrag.retrieval.params import TOP_K
from kgrag.retrieval.units import Evidence, Units
from kgrag.store.vectors import VectorTable

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources


class NaiveStrategy:
    """The dense baseline every graph method must beat at the same budget."""

    def __init__(self, table: VectorTable, units: Units, top_k: int | None, budget: int) -> None:
        self.table, self.units, self.budget = table, units, budget
        if top_k is None:
            # Enough candidates to fill the budget twice over with typical units.
            typical = max(1, int(statistics.median(units.tokens.values())))
            top_k = 2 * math.ceil(budget / typical) + 10
        self.top_k = min(top_k, len(units.tokens))

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> NaiveStrategy:
        return cls(open_dense(artefacts["dense"]), resources.chunks,
                   config["top_k"], config["budget_tokens"])

    def ranked(self, vector: np.ndarray, k: int | None = None) -> list[str]:
        """Chunk ids by cosine similarity to ``vector``, best first."""
        return [unit for unit, _ in self.table.search(vector, k or self.top_k)]

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        """The ``top_k`` candidates, best first (what ``fusion`` fuses)."""
        return self.ranked(vector)

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        return self.units.filled(self.ranking(question, vector), self.budget)


SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
EMBEDDER = Param("embedder", {"type": "string", "minLength": 1, "pattern": PLAIN_TEXT},
                 "the embedder of this strategy's own dense index and of its questions: a "
                 "bundled name, a sentence-transformers folder or a training entry's name "
                 "(base and tuned side by side). Absent: models.embedder.")


def dense_index(config: dict[str, Any]) -> dict[str, str]:
    """The dense index of the spec's embedder, or of the strategy's own: ``dense.<name>``
    for a name that is safe in a folder name (a training entry, a bundled model), else
    ``dense.embedder-<hash of the path>``."""
    own = config.get("embedder")
    if own is None:
        return {"dense": "dense"}
    if not SAFE.fullmatch(own) or ".." in own:
        own = "embedder-" + hashlib.sha256(own.encode()).hexdigest()[:12]
    return {"dense": f"dense.{own}"}


DECLARATION = Strategy("naive", "dense top-k chunks in the budget.", (TOP_K, EMBEDDER),
                       NaiveStrategy, dense_index)
