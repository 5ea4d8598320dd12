"""Strategy ``ppr``: chunks ranked by personalised PageRank from the question's entities.

KET-RAG's local search and HugRAG's expansion walk a hop or two from the entities
nearest the question; a multi-hop question needs the passage two links away.
HippoRAG's answer, followed here: a random walk with restart at the question's
entities over the entity–chunk graph of any build (``kgrag.retrieval.ppr_search``:
the graph, the seeds and the walk), chunks ranked by the mass they collect and
filled into the budget like every other strategy. A question naming no entity of the
graph is answered by the dense ranking, and its trace says so. The trace lists the
seeds with their weights, the entities the walk reached, each retrieved chunk's mass
(why a chunk came back), and the edges among those entities and chunks (the report draws
them as the question's subgraph).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.declarations import Config, GraphRef, Need, Param, Problem, Strategy
from kgrag.errors import KgragError
from kgrag.retrieval.budget import LazyRanking
from kgrag.retrieval.params import HIERARCHY, SKELETON
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.units import Evidence, Units
from kgrag.retrieval.walk_params import WALK_PARAMS, walk_problems

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

# graph key of the spec → the step whose entity tables ppr reads
GRAPH_STEPS = {"skeleton": "extract", "entities": "extract", "hierarchy": "hierarchy"}
class PprStrategy:
    """HippoRAG-style retrieval by personalised PageRank (see the module docstring)."""

    def __init__(self, search: PprSearch, units: Units, budget: int) -> None:
        self.search, self.units, self.budget = search, units, budget

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> PprStrategy:
        search = PprSearch.load(config, artefacts["graph"], artefacts["dense"],
                                artefacts["chunks"], resources)
        return cls(search, resources.chunks, config["budget_tokens"])

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return self.search.scored(question, vector)[0]

    def reading(self, question: str, vector: np.ndarray) -> LazyRanking:
        """``ranking``, sorted only as far as it is read (what fusion reads)."""
        return self.search.reading(question, vector, self.sizes)

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        """Each chunk's tokens, in the graph's chunk order (the search's lazy fill reads
        them by position)."""
        return np.array([self.units.tokens[c] for c in self.search.graph.chunk_ids])

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        """``units.filled(ranking)``, the ranking sorted only as far as the fill reads it."""
        chosen, scores, trace = self.search.filled(question, vector, self.sizes,
                                                   self.units.tokens, self.budget)
        context = self.units.context(chosen)
        trace["scores"] = {c: round(scores.get(c, 0.0), 8) for c in context.unit_ids}
        if "reached" in trace:  # a walk, not the dense fallback: the edges it went through
            trace["subgraph"] = self.search.subgraph([*trace["seeds"], *trace["reached"]],
                                                     context.unit_ids)
        return dataclasses.replace(context, trace=trace)


def _needs(config: Config) -> dict[str, Need]:
    named = [key for key in GRAPH_STEPS if config.get(key)]
    if len(named) != 1:
        raise KgragError(f"strategy {config['name']!r}: ppr walks one graph; name a "
                         "skeleton, hierarchy or entities build (exactly one)")
    key = named[0]
    return {"graph": GraphRef(key, GRAPH_STEPS[key], "ppr walks its entities"),
            "dense": "dense", "chunks": "chunks"}


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    if sum(entry[key] is not None for key in GRAPH_STEPS) != 1:
        yield ("query", index), ("strategy ppr walks one graph: set one of 'skeleton', "
                                 "'hierarchy' or 'entities' to the name of a graph build")
    yield from walk_problems(index, entry, spec)


# Strategy ppr's defaults, chosen on the dev halves of the shared samples (seeds_near also
# on the dev needles of a scale corpus, docs/scale.md); the ppr channels of ket and hugrag
# keep the walk parameters' own (their shapes were not measured).
PPR_DEFAULTS = {"phrases": "named", "dense_seeds": 0.02, "seeds_near": 50}
PPR_PARAMS = tuple(dataclasses.replace(p, default=PPR_DEFAULTS[p.name])
                   if p.name in PPR_DEFAULTS else p for p in WALK_PARAMS)

DECLARATION = Strategy(
    "ppr", "chunks ranked by personalised PageRank from the question's entities over the "
    "entity–chunk graph of a skeleton or hierarchy build (HippoRAG).",
    (SKELETON, HIERARCHY,
     Param("entities", {"type": ["string", "null"]},
           "name of an entities graph build (the extraction alone). A ppr strategy names one "
           "of skeleton, hierarchy or entities.", default=None), *PPR_PARAMS),
    PprStrategy, _needs, problems=_problems)
