"""HugRAG's causal filter (paper Eq. 4, Figs. 5–6): one LLM call keeps the causal evidence.

The evidence an expansion chose is linearised with short ids (``M`` modules, ``N``
entities, ``R`` relationships, ``T`` text chunks) and one constrained LLM call
returns JSON ``{precise, ct_precise, p_answer}`` (the spurious-aware prompt, Fig. 5)
or ``{precise}`` (the standard prompt, Fig. 6); the id lists are enums of the ids
shown, at most 10 each. The answer step then reads only the ``precise`` items.
Fallback, which the strategy records (and the retrieve step counts) per question: when
the output never parses, ``precise`` is empty, or it names only ids that were not
shown, the whole expansion is kept (what the no-filter ablation reads). Ids that were
not shown are dropped from a reply that also names shown ones. With ``filter_top_up``
the strategy adds back, up to the budget, what the filter neither kept nor called
spurious (``ct_precise``), so a filter that keeps too little prunes without starving
the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kgrag.models.llm import CachedLLM, InvalidOutput
from kgrag.retrieval.hugrag.graph import HugragGraph

PREFIX = {"module": "M", "entity": "N", "relationship": "R", "chunk": "T"}
MAX_IDS = 10
FILTER_MAX_TOKENS = 320

FILTER_SPURIOUS_AWARE = (
    "You are a causality analyst. Below are a question and evidence items, each with an id. "
    "Put in \"precise\" the ids of the items that lie on a causal or logical path from the "
    "question to its answer. Put in \"ct_precise\" the ids of items that are only topically "
    "similar or merely correlated: they must not be used. Then write \"p_answer\", a short "
    "preliminary answer (at most 80 words)."
)
FILTER_STANDARD = (
    "You are a causality analyst. Below are a question and evidence items, each with an id. "
    "Put in \"precise\" the ids of the items that lie on a causal or logical path from the "
    "question to its answer."
)


@dataclass(frozen=True)
class Item:
    """One linearised evidence item."""

    item_id: str  # N1, R3, M2, T1
    kind: str
    key: str | None  # node key (None for relationships)
    text: str
    tokens: int


def linearise(graph: HugragGraph, chosen: dict[int, int],
              relationships: list[tuple[str, int]]) -> list[Item]:
    """Evidence items with short ids: modules, entities, relationships, then text."""
    items: list[Item] = []
    for kind in ("module", "entity"):
        nodes = [graph.nodes[i] for i in chosen if graph.nodes[i].kind == kind]
        items += [Item(f"{PREFIX[kind]}{n + 1}", kind, node.key, node.text, node.tokens)
                  for n, node in enumerate(nodes)]
    items += [Item(f"R{n + 1}", "relationship", None, text, tokens)
              for n, (text, tokens) in enumerate(relationships)]
    chunks = [graph.nodes[i] for i in chosen if graph.nodes[i].kind == "chunk"]
    items += [Item(f"T{n + 1}", "chunk", node.key, node.text, node.tokens)
              for n, node in enumerate(chunks)]
    return items


def filter_schema(ids: list[str], spurious_aware: bool) -> dict[str, Any]:
    """The causal filter's JSON schema: id lists are enums of the ids shown."""
    id_list = {"type": "array", "items": {"enum": ids}, "maxItems": MAX_IDS}
    properties: dict[str, Any] = {"precise": id_list}
    if spurious_aware:
        properties["ct_precise"] = id_list
        properties["p_answer"] = {"type": "string", "maxLength": 480}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def filter_prompt(question: str, items: list[Item], spurious_aware: bool) -> str:
    instruction = FILTER_SPURIOUS_AWARE if spurious_aware else FILTER_STANDARD
    evidence = "\n".join(f"{item.item_id}: {' '.join(item.text.split())}" for item in items)
    return f"{instruction}\n\nQuestion: {question}\n\nEvidence:\n{evidence}\n\nJSON:"


def evidence_text(items: list[Item]) -> str:
    return "\n\n".join(item.text for item in items)


@dataclass(frozen=True)
class FilterReply:
    """What the filter kept, the shown ids it called spurious, what happened (``ok`` or a
    fallback) and its cost (requests, tokens in, tokens out)."""

    kept: list[Item]
    spurious: set[str]
    outcome: str
    calls: tuple[int, int, int]

    @property
    def fell_back(self) -> bool:
        return self.outcome != "ok"


def read_reply(value: dict[str, Any], items: list[Item]) -> tuple[list[Item], set[str], str]:
    """Kept items, spurious ids and the outcome of one parsed reply: ids not shown are
    dropped; a reply keeping nothing shown keeps every item (a fallback)."""
    shown = {item.item_id for item in items}
    named = set(value["precise"])
    spurious = set(value.get("ct_precise", ())) & shown
    kept = [item for item in items if item.item_id in named]
    if kept:
        return kept, spurious, "ok"
    if named:
        return items, spurious, "fallback: only ids not shown, all evidence kept"
    return items, spurious, "fallback: empty precise list, all evidence kept"


def causal_filter(llm: CachedLLM, question: str, items: list[Item], *, spurious_aware: bool,
                  style: str) -> FilterReply:
    """One filter call over ``items`` (see the module docstring for the fallbacks)."""
    schema = filter_schema([item.item_id for item in items], spurious_aware)
    prompt = filter_prompt(question, items, spurious_aware)
    before = llm.usage.snapshot()
    try:
        value, _ = llm.ask_json(prompt, schema, style=style, max_tokens=FILTER_MAX_TOKENS)
        kept, spurious, outcome = read_reply(value, items)
    except InvalidOutput:
        kept, spurious = items, set()
        outcome = "fallback: output never parsed, all evidence kept"
    spent = llm.usage.since(before)
    return FilterReply(kept, spurious, outcome,
                       (spent.calls + spent.cache_hits, spent.tokens_in, spent.tokens_out))
