"""Strategy ``hugrag``: HugRAG's online retrieval (paper §3.2, App. B.2–B.3).

A question is answered in four steps over one hierarchy build's graph
(``kgrag.retrieval.hugrag.graph``: entities, modules and chunks joined by gate,
structural, membership and relationship edges):

1. a hybrid semantic and lexical score of every node;
2. seeds by MMR, entities and modules apart; seeds must score above 0, and when none
   does (a question the graph knows nothing about), the best chunks seed the search
   instead, and the trace records the fallback;
3. gated best-first expansion within the budget, then the relationships among the
   chosen entities (steps 1–3: ``kgrag.retrieval.hugrag.search``); with
   ``evidence_split: grounded`` the kinds of node share the budget
   (``kgrag.retrieval.hugrag.budget``), and by default
   (``chunk_rank: score``) whole chunks by hybrid score take what the rows' shares
   leave, the rows the walk passed through getting what no further chunk fits;
4. the causal filter, one LLM call that keeps the evidence on a causal path to the
   answer (``kgrag.retrieval.hugrag.causal_filter``).

``entity_seeds: ppr`` (not in the paper) picks the ``seed_entities``
entity seeds by personalised PageRank instead of MMR: the hierarchy's canonical
entities are walked from the entities the question names (``PprSearch``, as
strategy ``ppr`` walks them) and the entities with the most mass seed the gated
expansion, each at its hybrid score. Module seeds stay MMR's. A question naming no
entity of the graph is seeded by MMR, and the trace says so.

Ablations are switches: ``use_gates: false`` drops gate edges,
``use_hierarchy: false`` drops modules (no module seeds, membership or gates: entity
neighbourhoods only), ``causal_filter: false`` skips step 4 (one LLM call per
query), ``filter_prompt: standard`` uses Fig. 6's prompt.

For the paper's structural metrics (App. E) every question also records which
entities the expansion reached at which hop, and — when gates are on — what a
second, gate-free expansion reached (pure graph work, no LLM), so reachability,
coverage and min hops compare with and without gates on identical questions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.declarations import Config, GraphRef, Group, Need, Param, Problem, Strategy
from kgrag.errors import KgragError
from kgrag.limits import ITEMS_MAX, ROUNDS_MAX
from kgrag.retrieval.hugrag.budget import (
    GROUNDED_PARAMS,
    check_summary_share,
    chunks_then_rows,
    shares,
)
from kgrag.retrieval.hugrag.causal_filter import Item, causal_filter, evidence_text, linearise
from kgrag.retrieval.hugrag.graph import HugragGraph
from kgrag.retrieval.hugrag.search import (
    Walk,
    best_chunks,
    expand,
    hybrid_scores,
    mmr,
    relationships_among,
)
from kgrag.retrieval.params import HIERARCHY
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.units import Evidence
from kgrag.retrieval.walk_params import WALK_PARAMS, walk_problems

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources


class HugragStrategy:
    """HugRAG retrieval over one hierarchy build (see the module docstring)."""

    def __init__(self, config: dict[str, Any], graph: HugragGraph, resources: Resources,
                 ppr: PprSearch | None = None) -> None:
        self.config, self.graph, self.ppr = config, graph, ppr
        # PPR graph entity node → this graph's entity node (title entities have none)
        self.walked: dict[int, int] = {}
        if ppr is not None:
            for i, node in enumerate(graph.nodes):
                found = ppr.graph.named(node.key) if node.kind == "entity" else None
                if found is not None:
                    self.walked.setdefault(found, i)
        self.llm, self.prompt_style = resources.llm, resources.prompt_style
        self.tokenizer = resources.tokenizer
        self.weights = dict(config["weights"])
        allowed = {"structural", "relationship"}
        if config["use_hierarchy"]:
            allowed.add("membership")
            if config["use_gates"]:
                allowed.add("gate")
        self.allowed = frozenset(allowed)
        self.caps = shares(config) if config.get("evidence_split") == "grounded" else None
        self.chunks_first = self.caps is not None and config.get("chunk_rank", "walk") != "walk"
        if self.caps is not None and self.chunks_first:
            self.caps["chunk"] = 0  # the walk picks rows only; chunks are ranked after it

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> HugragStrategy:
        if config["causal_filter"] and resources.llm is None:
            raise KgragError(f"strategy {config['name']!r}: the causal filter needs an LLM")
        graph = HugragGraph.load(artefacts, resources.chunks,
                                 use_hierarchy=config["use_hierarchy"],
                                 use_gates=config["use_gates"])
        if config.get("evidence_split") == "grounded":
            check_summary_share(config, graph)
        ppr = None
        if config.get("entity_seeds") == "ppr":
            ppr = PprSearch.load(config, artefacts["hierarchy"], artefacts["dense"],
                                 artefacts["chunks"], resources)
        return cls(config, graph, resources, ppr)

    def _expand(self, seeds: list[int], scores: np.ndarray, allowed: frozenset[str]) -> Walk:
        c = self.config
        return expand(self.graph, seeds, scores, c["budget_tokens"], weights=self.weights,
                      decay=c["hop_decay"], max_hops=c["max_hops"], fan_out=c["fan_out"],
                      allowed=allowed, caps=self.caps)

    def reached(self, chosen: dict[int, int]) -> dict[str, int]:
        """Entity name → hop for the entities an expansion chose."""
        return {self.graph.nodes[i].key: hop for i, hop in chosen.items()
                if self.graph.nodes[i].kind == "entity"}

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        c, graph = self.config, self.graph
        scores = hybrid_scores(graph, question, vector, c["semantic_weight"])
        trace: dict[str, Any] = {}
        seeds = self._ppr_seeds(question, vector, trace) if self.ppr is not None else []
        if not seeds:
            seeds = [i for i in mmr(graph, scores, "entity", c["seed_entities"], c["mmr_lambda"])
                     if scores[i] > 0]
        if c["use_hierarchy"]:
            seeds += [i for i in mmr(graph, scores, "module", c["seed_modules"],
                                     c["mmr_lambda"]) if scores[i] > 0]
        if self.caps is not None and c["seed_chunks"]:
            seeds += mmr(graph, scores, "chunk", c["seed_chunks"], c["mmr_lambda"])
        if not seeds:  # nothing in the graph relates to the question at all
            trace["fallback"] = "no seed matches the question: seeded from the best chunks"
            seeds = mmr(graph, scores, "chunk", c["seed_entities"] + c["seed_modules"],
                        c["mmr_lambda"])
        walk = self._expand(seeds, scores, self.allowed)
        chosen, used = walk.chosen, walk.used
        if self.chunks_first:
            chosen, used = chunks_then_rows(graph, c, walk, scores, trace)
        elif self.caps is not None:  # the chunks' share, filled when the expansion fell short
            shown = sum(graph.nodes[i].tokens for i in chosen if graph.nodes[i].kind == "chunk")
            extra, added = best_chunks(graph, scores, chosen, self.caps["chunk"] - shown)
            chosen |= dict.fromkeys(extra, c["max_hops"] + 1)
            used += added
            trace["chunks_beyond_expansion"] = len(extra)
        relationships, _ = relationships_among(graph, chosen, c["budget_tokens"] - used)
        items = linearise(graph, chosen, relationships)
        trace |= {"seeds": [graph.nodes[i].key for i in seeds],
                  "reached": self.reached(chosen), "items": len(items)}
        if "gate" in self.allowed:
            without = self._expand(seeds, scores, self.allowed - {"gate"})
            found = (chunks_then_rows(graph, c, without, scores, {})[0] if self.chunks_first
                     else without.chosen)
            trace["reached_without_gates"] = self.reached(found)
        kept, calls, llm_ms = items, (0, 0, 0), 0.0
        trace["filter"] = "off"
        if c["causal_filter"] and not items:
            trace["filter"] = "skipped: no evidence item fits the budget"
        elif c["causal_filter"]:
            started = time.perf_counter()
            reply = causal_filter(self.llm, question, items,
                                  spurious_aware=c["filter_prompt"] == "spurious_aware",
                                  style=self.prompt_style)
            llm_ms = (time.perf_counter() - started) * 1000
            kept, calls, trace["filter"] = reply.kept, reply.calls, reply.outcome
            trace["kept"] = len(kept)
            if reply.fell_back:
                trace["fallback"] = reply.outcome
            if c.get("filter_top_up"):
                kept = self._top_up(kept, items, reply.spurious, scores, chosen, trace)
        unit_ids = [item.key for item in kept if item.kind == "chunk" and item.key is not None]
        text = evidence_text(kept)
        return Evidence(unit_ids, [graph.chunk_docs[u] for u in unit_ids], text,
                       self.tokenizer.count(text), trace=trace, llm_calls=calls[0],
                       llm_tokens_in=calls[1], llm_tokens_out=calls[2], llm_ms=llm_ms)

    def _top_up(self, kept: list[Item], items: list[Item], spurious: set[str],
                scores: np.ndarray, chosen: dict[int, int], trace: dict[str, Any]
                ) -> list[Item]:
        """The kept items, then the rest of the unfiltered evidence that the filter did not
        call spurious (chunks first, in the order chosen), then chunks never shown, best
        score first, while the budget lasts; how many items and tokens were added goes to
        ``trace``."""
        graph, budget = self.graph, self.config["budget_tokens"]
        used = sum(item.tokens for item in kept)
        shown = {id(item) for item in kept}
        rest = [item for item in items if id(item) not in shown
                and item.item_id not in spurious]
        rest.sort(key=lambda item: item.kind != "chunk")  # stable: chunks first
        fresh, _ = best_chunks(graph, scores, chosen, budget - used)
        rest += [Item(f"T{len(items) + n + 1}", "chunk", graph.nodes[i].key,
                      graph.nodes[i].text, graph.nodes[i].tokens) for n, i in enumerate(fresh)]
        added = []
        for item in rest:
            if used + item.tokens <= budget:
                added.append(item)
                used += item.tokens
        trace["top_up"] = {"items": len(added), "tokens": sum(i.tokens for i in added)}
        return kept + added

    def _ppr_seeds(self, question: str, vector: np.ndarray, trace: dict[str, Any]
                   ) -> list[int]:
        """The ``seed_entities`` entities with the most PPR mass from the question's
        entities (none when no entity links: MMR seeds instead, and ``trace`` says so)."""
        assert self.ppr is not None
        mass, _, walk = self.ppr.run(question, vector)
        if mass is None:
            trace["fallback"] = "no entity of the question is in the graph: MMR entity seeds"
            return []
        trace["ppr_seeds"] = walk["seeds"]
        nodes = list(self.walked)
        best = np.argsort(-mass[nodes], kind="stable")[: self.config["seed_entities"]]
        return [self.walked[nodes[k]] for k in best if mass[nodes[k]] > 0]


WHY = "hugrag retrieves over a hierarchy build"


def _needs(config: Config) -> dict[str, Need]:
    needs: dict[str, Need] = {"hierarchy": GraphRef("hierarchy", "hierarchy", WHY),
                              "dense": "dense"}
    if config.get("entity_seeds") == "ppr":  # the walk reads the chunk titles
        needs["chunks"] = "chunks"
    if config["use_hierarchy"]:
        needs["summaries"] = GraphRef("hierarchy", "summaries", WHY)
        if config["use_gates"]:
            needs["gates"] = GraphRef("hierarchy", "gates", WHY)
    return needs


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    if entry.get("evidence_split") == "grounded" and \
            entry["summary_share"] + entry["entity_share"] > 1:
        yield (("query", index, "summary_share"),
               (f"summary_share {entry['summary_share']:g} and entity_share "
                f"{entry['entity_share']:g} add up to more than the whole budget"))
    if entry.get("filter_top_up") and not entry["causal_filter"]:
        yield (("query", index, "filter_top_up"),
               ("filter_top_up tops up what the causal filter keeps; set causal_filter true "
                "or drop filter_top_up"))
    yield from walk_problems(index, entry, spec)


DECLARATION = Strategy(
    "hugrag", "HugRAG (hybrid-score MMR seeds over entities and modules, gated best-first "
    "expansion, LLM causal filter).",
    (HIERARCHY,
     Param("seed_entities", {"type": "integer", "minimum": 0, "maximum": ITEMS_MAX}, "entity seeds chosen by MMR.",
           default=3),
     Param("seed_modules", {"type": "integer", "minimum": 0, "maximum": ITEMS_MAX},
           "module seeds (all levels) chosen by MMR.", default=3),
     Param("mmr_lambda", {"type": "number", "minimum": 0, "maximum": 1},
           "MMR trade-off between relevance and novelty.", default=0.7),
     Param("semantic_weight", {"type": "number", "minimum": 0, "maximum": 1},
           "α in the hybrid seed score α·cosine + (1−α)·keyword overlap.", default=0.7),
     Param("hop_decay", {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
           "γ, the gain of a node h hops from a seed is multiplied by γ^h.", default=0.7),
     Param("max_hops", {"type": "integer", "minimum": 0, "maximum": ROUNDS_MAX}, "hops from a seed at most.",
           default=5),
     Param("fan_out", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
           "best unvisited neighbours pushed per expanded node.", default=5),
     Param("weights", {"type": "object", "additionalProperties": False, "properties": {
         edge: {"type": "number", "minimum": 0, "default": weight}
         for edge, weight in (("gate", 1.2), ("structural", 1.0), ("membership", 1.0),
                              ("relationship", 0.8))}},
           "edge-type weights of the expansion gain.", default={}),
     Param("use_gates", {"type": "boolean"}, "expand over causal gates (ablation: false).",
           default=True),
     Param("use_hierarchy", {"type": "boolean"},
           "use modules (seeds, membership edges, gates); false searches entity "
           "neighbourhoods only (ablation).", default=True),
     Param("causal_filter", {"type": "boolean"},
           "one LLM call keeps only the evidence on causal paths (ablation: false).",
           default=True),
     Param("filter_prompt", {"enum": ["spurious_aware", "standard"]},
           "spurious_aware (the paper's main prompt: causal vs spurious ids) or standard "
           "(causal ids only).", default="spurious_aware"),
     Param("entity_seeds", {"enum": ["mmr", "ppr"]},
           "how the seed_entities entity seeds are chosen. mmr (the paper: MMR over the hybrid "
           "score) or ppr (not in the paper: the entities with most personalised-PageRank mass "
           "from the entities the question names, over the hierarchy's canonical entities; MMR "
           "when none is named; takes ppr's damping, dense_seeds, titles and seed options). "
           "Left out: mmr.", off="mmr"),
     Param("evidence_split", {"enum": ["expansion", "grounded"]},
           "how the budget is spent. expansion (the paper's: one best-first expansion over "
           "every node kind until the budget is spent) or grounded (module summaries and "
           "entity rows each get a share of the budget, summary_share and entity_share, and "
           "the rest goes to the chunks that ground the entities the expansion reached, "
           "topped up with the best-scoring chunks when it reached too few). Left out: "
           "expansion.", off="expansion"),
     Param("filter_top_up", {"type": "boolean"},
           "when the causal filter keeps less than the budget, add back the unfiltered "
           "evidence it did not call spurious (chunks first), then the best chunks it was "
           "not shown, up to the budget; the trace records what was added. Left out: "
           "false (the answer reads only what the filter kept).", off=False)),
    HugragStrategy, _needs, groups=(Group("entity_seeds", "ppr", WALK_PARAMS),
                                    Group("evidence_split", "grounded", GROUNDED_PARAMS)),
    problems=_problems, uses_llm=lambda config: bool(config["causal_filter"]),
    evaluated=lambda config: {"graph": GraphRef("hierarchy", "hierarchy", WHY)})
