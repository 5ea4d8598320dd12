"""Strategy ``hybrid``: Hybrid-RAG, GraphRAG local search on a full KG plus dense chunks.

The paper's Hybrid-RAG joins the MS-Graph-RAG index and the Text-RAG index with
"the context split equally" (it writes β=0.5 but means θ=0.5). Here θλ goes to
local search on the skeleton, whose text units are the chunks, and dense chunks
(naive's ranking) fill λ minus what the skeleton context actually took, so budget
the skeleton leaves unused is not lost (the same flow as KET-RAG's, in the other
direction). The skeleton's sections come first, then a ``-----Dense sources-----``
section; a chunk already among the skeleton's sources is not repeated.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.contents.dense import open_dense
from kgrag.declarations import Config, GraphRef, Need, Strategy
from kgrag.retrieval.layout import TEXT_JOINER, Layout, check_theta, share
from kgrag.retrieval.local_search import LocalSearch
from kgrag.retrieval.naive import NaiveStrategy
from kgrag.retrieval.params import SKELETON, TOP_ENTITIES, theta
from kgrag.retrieval.units import Evidence, Units

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

DENSE_HEADER = "-----Dense sources-----"


class HybridStrategy:
    """Skeleton local search for θ of the budget, dense chunks for the rest."""

    def __init__(self, dense: NaiveStrategy, local: LocalSearch, units: Units, layout: Layout,
                 budget: int, theta: float) -> None:
        self.dense, self.local, self.units, self.layout = dense, local, units, layout
        self.budget, self.theta = budget, theta

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> HybridStrategy:
        units, budget = resources.chunks, config["budget_tokens"]
        layout = Layout(resources.tokenizer)
        local = LocalSearch.load(artefacts["skeleton"], units, layout,
                                 top_entities=config["top_entities"])
        # Candidates for the whole budget: the skeleton may leave all of it to dense chunks.
        dense = NaiveStrategy(open_dense(artefacts["dense"]), units, None, budget)
        return cls(dense, local, units, layout, budget, config["theta"])

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        local = self.local.search(vector.astype(np.float32), share(self.theta, self.budget))
        taken = set(local.unit_ids)
        dense, _ = self.layout.fill(DENSE_HEADER, TEXT_JOINER,
                                    [c for c in self.dense.ranked(vector) if c not in taken],
                                    self.units.text, self.units.tokens,
                                    self.budget - local.tokens)
        unit_ids = local.unit_ids + dense.ids
        text, tokens = self.layout.render([*local.sections, dense])
        return Evidence(unit_ids, [self.units.doc[u] for u in unit_ids], text, tokens)


def _needs(config: Config) -> dict[str, Need]:
    check_theta(config)
    return {"dense": "dense",
            "skeleton": GraphRef("skeleton", "skeleton", "hybrid searches a knowledge graph")}


DECLARATION = Strategy(
    "hybrid", "local search on a (full) skeleton plus dense chunks.",
    (theta(0.5, "Hybrid-RAG's equal split"), SKELETON, TOP_ENTITIES), HybridStrategy, _needs)
