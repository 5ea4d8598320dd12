"""HugRAG's budget under ``evidence_split: grounded`` (not in the paper): how the context
splits between module summaries, entity rows and source chunks, and, with ``chunk_rank``
score or score_and_walk, the whole chunks chosen by score after the walk has picked its
rows within their shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from kgrag.declarations import Param
from kgrag.errors import KgragError
from kgrag.limits import ITEMS_MAX
from kgrag.retrieval.hugrag.graph import HugragGraph
from kgrag.retrieval.hugrag.search import Walk, best_chunks

GROUNDED_PARAMS = (
    Param("summary_share", {"type": "number", "minimum": 0, "maximum": 1},
          "evidence_split grounded: share of budget_tokens reserved for module summaries.",
          default=0),
    Param("entity_share", {"type": "number", "minimum": 0, "maximum": 1},
          "evidence_split grounded: share of budget_tokens reserved for entity rows.",
          default=0),
    Param("seed_chunks", {"type": "integer", "minimum": 0, "maximum": ITEMS_MAX},
          "evidence_split grounded: chunks chosen by MMR that seed the expansion beside the "
          "entity and module seeds (not in the paper), so the walk also starts from the "
          "text most like the question and reaches the chunks its entities ground.",
          default=3),
    Param("chunk_rank", {"enum": ["walk", "score", "score_and_walk"]},
          "evidence_split grounded: how chunks are chosen. score (the walk picks the rows "
          "within their shares; every whole chunk the rest of the budget carries goes by "
          "hybrid score, and the rows the walk passed fill what no further chunk fits), "
          "score_and_walk (as score, ranked by hybrid score plus the gain the walk reached "
          "the chunk with) or walk (the chunks the expansion reaches, best gain first, then "
          "the best-scoring ones).", default="score", off="walk"),
)


def shares(config: dict[str, Any]) -> dict[str, int]:
    """Tokens at most for module summaries, entity rows and chunks (the rest) under
    ``evidence_split: grounded``; no summaries without the hierarchy."""
    budget = config["budget_tokens"]
    modules = int(config["summary_share"] * budget) if config["use_hierarchy"] else 0
    entities = int(config["entity_share"] * budget)
    return {"module": modules, "entity": entities, "chunk": budget - modules - entities}


def check_summary_share(config: dict[str, Any], graph: HugragGraph) -> None:
    """A summaries' share that holds no module summary at all is an error, not a silent
    expansion without modules."""
    room = shares(config)["module"]
    sizes = [node.tokens for node in graph.nodes if node.kind == "module"]
    if room and sizes and room < min(sizes):
        raise KgragError(
            f"strategy {config['name']!r}: summary_share {config['summary_share']:g} of "
            f"budget_tokens {config['budget_tokens']} is {room} tokens, too small for one "
            f"module summary (the shortest has {min(sizes)}); raise budget_tokens or "
            "summary_share, or set summary_share 0")


def chunks_then_rows(graph: HugragGraph, config: dict[str, Any], walk: Walk,
                     scores: np.ndarray, trace: dict[str, Any]) -> tuple[dict[int, int], int]:
    """``chunk_rank`` score or score_and_walk: the rows the walk chose within their
    shares, then every whole chunk the rest of the budget carries, ranked by the hybrid
    score (plus the gain the walk reached the chunk with, for score_and_walk), then the
    rows the walk passed through, in its order, in what no further chunk fits."""
    budget = config["budget_tokens"]
    priority = scores
    if config["chunk_rank"] == "score_and_walk":
        priority = scores.copy()
        reached = [i for i in walk.gains if graph.nodes[i].kind == "chunk"]
        priority[reached] += [walk.gains[i] for i in reached]
    chosen, used = dict(walk.chosen), walk.used
    picked, added = best_chunks(graph, priority, chosen, budget - used)
    beyond = config["max_hops"] + 1  # a chunk the walk never reached
    chosen |= {i: walk.passed.get(i, beyond) for i in picked}
    used += added
    rows = 0
    for node, hop in walk.passed.items():
        tokens = graph.nodes[node].tokens
        if graph.nodes[node].kind != "chunk" and used + tokens <= budget:
            chosen[node] = hop
            used += tokens
            rows += tokens
    trace["chunks_walk_reached"] = sum(i in walk.gains for i in picked)
    trace["rows_in_remainder"] = rows
    return chosen, used
