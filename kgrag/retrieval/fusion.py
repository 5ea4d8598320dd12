"""Strategy ``fusion``: reciprocal-rank fusion of two other strategies' rankings.

Dense and BM25 fail on different questions (paraphrase vs rare names), so their
fusion is the usual hybrid baseline, and the one a graph method has to beat. RRF
(Cormack et al., 2009) scores a unit Σ_m 1 / (k + rank_m), rank counted from 1 in
each member's ranking, k = 60 by default: it needs no score calibration between a
cosine and a BM25 score. Ties keep the order in which the members first name a
unit (the first member's ranking first), so a context is a pure function of the
index.

A fusion entry names two other entries of the same spec (``fuse``): its members
(``kgrag.retrieval`` resolves and loads them), each the very strategy its own row
measures (one ranking definition per strategy), at the fusion's budget (a member's
candidate depth follows the budget).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kgrag.declarations import Config, Param, Problem, Strategy
from kgrag.limits import ITEMS_MAX
from kgrag.retrieval.units import Evidence, Units

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources


class Ranker(Protocol):
    """A strategy that ranks units: every one it would consider, best first."""

    def ranking(self, question: str, vector: np.ndarray) -> list[str]: ...


def reciprocal_rank_fusion(rankings: list[list[str]], k: int = 60) -> list[str]:
    """Units of all ``rankings`` by Σ 1 / (k + rank), best first (ties: first seen)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, unit in enumerate(ranking, start=1):
            scores[unit] = scores.get(unit, 0.0) + 1.0 / (k + rank)
    first_seen = {unit: i for i, unit in enumerate(scores)}
    return sorted(scores, key=lambda unit: (-scores[unit], first_seen[unit]))


class FusionStrategy:
    """RRF of two member strategies' rankings, filled greedily into the budget."""

    def __init__(self, members: list[Ranker], units: Units, budget: int, rrf_k: int) -> None:
        self.members, self.units, self.budget, self.rrf_k = members, units, budget, rrf_k

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> FusionStrategy:
        members = [resources.members[str(i)] for i in range(len(config["fuse"]))]
        return cls(members, resources.chunks, config["budget_tokens"], config["rrf_k"])

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return reciprocal_rank_fusion([m.ranking(question, vector) for m in self.members],
                                      self.rrf_k)

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        return self.units.filled(self.ranking(question, vector), self.budget)


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    """``fuse`` must name two different entries (``kgrag.spec.references`` checks that
    each is another entry that ranks chunks)."""
    members = raw.get("fuse")
    if members is None:
        yield ("query", index), "strategy fusion needs 'fuse': the names of two other query entries"
        return
    if len(set(members)) != len(members):
        yield ("query", index, "fuse"), "fusion needs two different entries"


DECLARATION = Strategy(
    "fusion", "reciprocal-rank fusion of two other entries' rankings (fuse).",
    (Param("fuse", {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
           "names of two other entries of this query list whose rankings are fused (naive, "
           "bm25 or ppr)."),
     Param("rrf_k", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
           "k of reciprocal-rank fusion, a unit scores the sum of 1 / (k + rank).", default=60)),
    FusionStrategy, lambda config: {}, problems=_problems, member_key="fuse",
    member_settings=lambda config: {"budget_tokens": config["budget_tokens"]})
