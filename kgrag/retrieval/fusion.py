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

The fused ranking is read only as deep as its use needs (``fused``): a context reads its
members' rankings about as far as its fill does, not the quarter of a million chunks
that BM25 scores at a million, and ``ranking`` reads them whole through the same code.
Both are exactly the fusion of the members' whole rankings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kgrag.declarations import Config, Param, Problem, Strategy
from kgrag.limits import ITEMS_MAX
from kgrag.retrieval.budget import FIRST_BLOCK, LazyRanking, fill_as_read
from kgrag.retrieval.units import Evidence, Units

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources


class Ranker(Protocol):
    """A strategy that ranks units: every one it would consider, best first. One that
    can also hand its ranking sorted only as far as it is read has ``reading`` (bm25,
    ppr); dense ranks only its ``top_k`` candidates, so its whole ranking is cheap."""

    def ranking(self, question: str, vector: np.ndarray) -> list[str]: ...


def fused(readings: list[LazyRanking], k: int, room: Callable[[], float]) -> Iterator[str]:
    """The reciprocal-rank fusion of ``readings``, best first, each member read only as
    deep as the order needs. At depth d every unit a member names in its first d has its
    rank in every member (``LazyRanking.ranks``), so its score and tie key are exact;
    a unit no member names in its first d scores at most Σ 1 / (k + d + 1) over the
    members whose ranking goes on past d, and is first named at rank d + 1 or later, by
    the first such member at the earliest. The units met are given in order while they
    come before that bound (score, then tie key); then d doubles. Once one member alone
    goes on past d and every unit met is given, the rest is that member's ranking: each
    unit left is in it alone, scores 1 / (k + its rank) and is first named there, so
    rank order is fused order, read in blocks cut to ``room()`` (``LazyRanking.after``).
    Scores are summed as a whole fusion sums them, member by member from 0.0, so they
    are the same floats; float sums and divisions are monotone, so the bound holds."""
    met: dict[str, tuple[float, tuple[int, int]]] = {}  # unit → (−score, tie key)
    given: set[str] = set()
    depth = FIRST_BLOCK
    while True:
        new = list(dict.fromkeys(unit for reading in readings for unit in reading.first(depth)
                                 if unit not in met))
        ranks = [reading.ranks(new) for reading in readings]
        for i, unit in enumerate(new):
            named = [(member, rank) for member, member_ranks in enumerate(ranks)
                     if (rank := member_ranks[i]) is not None]
            score = 0.0
            for _, rank in named:
                score += 1.0 / (k + rank)
            met[unit] = (-score, named[0])  # the tie key: where it is first named
        going_on = [m for m, reading in enumerate(readings) if not reading.ends_within(depth)]
        bound = 0.0
        for _ in going_on:
            bound += 1.0 / (k + depth + 1)
        unmet = (-bound, (going_on[0], depth + 1)) if going_on else None
        for unit in sorted((u for u in met if u not in given), key=met.__getitem__):
            if unmet is not None and met[unit] > unmet:
                break
            given.add(unit)
            yield unit
        else:
            if not going_on:
                return
            if len(going_on) == 1:
                yield from (unit for unit in readings[going_on[0]].after(depth, room)
                            if unit not in given)
                return
        depth *= 2


def reciprocal_rank_fusion(rankings: list[list[str]], k: int = 60) -> list[str]:
    """Units of all ``rankings`` by Σ 1 / (k + rank), best first (ties: first seen)."""
    return list(fused([LazyRanking(ranking) for ranking in rankings], k, lambda: math.inf))


class FusionStrategy:
    """RRF of two member strategies' rankings, filled greedily into the budget, the
    members read only as deep as the fill needs (``fused``)."""

    def __init__(self, members: list[Ranker], units: Units, budget: int, rrf_k: int) -> None:
        self.members, self.units, self.budget, self.rrf_k = members, units, budget, rrf_k

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> FusionStrategy:
        members = [resources.members[str(i)] for i in range(len(config["fuse"]))]
        return cls(members, resources.chunks, config["budget_tokens"], config["rrf_k"])

    def readings(self, question: str, vector: np.ndarray) -> list[LazyRanking]:
        """Each member's ranking, sorted as it is read where the member can (``reading``)."""
        return [member.reading(question, vector) if hasattr(member, "reading")
                else LazyRanking(member.ranking(question, vector)) for member in self.members]

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return list(fused(self.readings(question, vector), self.rrf_k, lambda: math.inf))

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        """``units.filled(ranking)``, the members read only as deep as the fill reads."""
        readings = self.readings(question, vector)
        return self.units.context(fill_as_read(lambda room: fused(readings, self.rrf_k, room),
                                               self.units.tokens, self.budget))


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
