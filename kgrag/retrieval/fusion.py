"""Strategy ``fusion``: reciprocal-rank fusion of two other strategies' rankings.

Dense and BM25 fail on different questions (paraphrase vs rare names), so their
fusion is the usual hybrid baseline, and the one a graph method has to beat. RRF
(Cormack et al., 2009) scores a unit Σ_m 1 / (k + rank_m), rank counted from 1 in
each member's ranking, k = 60 by default: it needs no score calibration between a
cosine and a BM25 score. Ties keep the order in which the members first name a
unit (the first member's ranking first), so a context is a pure function of the
index.

A fusion entry names two other entries of the same spec (``fuse``); compile hands
it their concrete configs, so each member is the very strategy its own row
measures (one ranking definition per strategy), loaded from its own artefacts
under role names prefixed by its position. Only strategies that rank chunks can
be fused: they register in ``RANKERS`` (``kgrag.retrieval`` fills it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kgrag.errors import KgragError
from kgrag.retrieval.budget import fill_budget
from kgrag.retrieval.units import Evidence, Units
from kgrag.spec.declarations import Config, Need, Param, Problem, Strategy

if TYPE_CHECKING:
    from kgrag.retrieval import Resources


class Ranker(Protocol):
    """A strategy that ranks units: every one it would consider, best first."""

    def ranking(self, question: str, vector: np.ndarray) -> list[str]: ...


RANKERS: dict[str, Strategy] = {}  # name → declaration of a strategy whose class ranks


def reciprocal_rank_fusion(rankings: list[list[str]], k: int = 60) -> list[str]:
    """Units of all ``rankings`` by Σ 1 / (k + rank), best first (ties: first seen)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, unit in enumerate(ranking, start=1):
            scores[unit] = scores.get(unit, 0.0) + 1.0 / (k + rank)
    first_seen = {unit: i for i, unit in enumerate(scores)}
    return sorted(scores, key=lambda unit: (-scores[unit], first_seen[unit]))


def _members(config: dict[str, Any]) -> list[dict[str, Any]]:
    members = config["fuse"]
    if len(members) != 2 or not all(isinstance(m, dict) for m in members):
        raise KgragError(f"strategy {config['name']!r}: fuse needs the configs of two "
                         "strategies (a spec names two entries; compile resolves them)")
    for member in members:
        if member["strategy"] not in RANKERS:
            raise KgragError(f"strategy {config['name']!r}: {member['strategy']} does not rank "
                             f"chunks; fuse one of {', '.join(sorted(RANKERS))}")
    return members


class FusionStrategy:
    """RRF of two member strategies' rankings, filled greedily into the budget."""

    def __init__(self, members: list[Ranker], units: Units, budget: int, rrf_k: int) -> None:
        self.members, self.units, self.budget, self.rrf_k = members, units, budget, rrf_k

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> FusionStrategy:
        members = []
        for i, member in enumerate(_members(config)):
            own = {role.split(".", 1)[1]: path for role, path in artefacts.items()
                   if role.startswith(f"{i}.")}
            members.append(RANKERS[member["strategy"]].runs.load(member, own, resources))
        return cls(members, resources.units, config["budget_tokens"], config["rrf_k"])

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return reciprocal_rank_fusion([m.ranking(question, vector) for m in self.members],
                                      self.rrf_k)

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        return self.units.context(fill_budget(self.ranking(question, vector),
                                              self.units.tokens, self.budget))


def _needs(config: Config) -> dict[str, Need]:
    return {f"{i}.{role}": need for i, member in enumerate(_members(config))
            for role, need in RANKERS[member["strategy"]].needs(member).items()}


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    """``fuse`` must name two different entries that rank chunks."""
    entries = {q["name"]: q["strategy"] for q in spec["query"]}
    rankers = sorted(RANKERS)
    members = raw.get("fuse")
    if members is None:
        yield ("query", index), "strategy fusion needs 'fuse': the names of two other query entries"
        return
    if len(set(members)) != len(members):
        yield ("query", index, "fuse"), "fusion needs two different entries"
    for j, member in enumerate(members):
        if member not in entries:
            yield ("query", index, "fuse", j), (f"no query entry named '{member}' (known: "
                                                f"{', '.join(entries)})")
        elif entries[member] not in rankers:
            yield ("query", index, "fuse", j), (f"'{member}' is a {entries[member]} entry; "
                                                f"fusion fuses rankings of {', '.join(rankers)} "
                                                "entries")


DECLARATION = Strategy(
    "fusion", "reciprocal-rank fusion of two other entries' rankings (fuse).",
    (Param("fuse", {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
           "names of two other entries of this query list whose rankings are fused (naive, "
           "bm25 or ppr)."),
     Param("rrf_k", {"type": "integer", "minimum": 1},
           "k of reciprocal-rank fusion, a unit scores the sum of 1 / (k + rank).", default=60)),
    FusionStrategy, _needs, problems=_problems)
