"""One title and summary per module of HugRAG's hierarchy (paper §3.1, App. B.1).

A module is shown to the LLM as its most connected members (relationships inside
the module; ties by name) with their descriptions, and the relationships among
those members, strongest first, each description clipped; one constrained call
returns JSON ``{title, summary}``. A reply that never parses falls back to the
first members' names and descriptions, so the build always completes and the
fallbacks are counted.

``extractive_summary`` writes both without an LLM, from the same ranked members:
the title names the first three, the summary is the first part of each member's
description (with ``nlp`` extraction, the sentence that first mentions it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import polars as pl

from kgrag.graphs.extraction.prompt import Style
from kgrag.graphs.hierarchy import Module
from kgrag.graphs.merge import DESCRIPTION_SEPARATOR
from kgrag.graphs.names import single_spaces
from kgrag.models.llm import CachedLLM, InvalidOutput

DESCRIPTION_CHARS = 200  # of one entity / relationship description in a summary prompt
MAX_TOKENS = 256

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string", "minLength": 3, "maxLength": 80},
                   "summary": {"type": "string", "minLength": 20, "maxLength": 600}},
    "required": ["title", "summary"],
    "additionalProperties": False,
}
SUMMARY_INSTRUCTION = (
    "Write a short title and a summary of this group of related entities from research "
    "articles. The summary says in two or three sentences what the entities are and how they "
    "relate, using only the information given."
)


def _clip(text: str) -> str:
    text = single_spaces(text)
    return text if len(text) <= DESCRIPTION_CHARS else text[:DESCRIPTION_CHARS - 1] + "…"


def ranked_members(module: Module, relationships: pl.DataFrame, limit: int
                   ) -> tuple[list[str], pl.DataFrame]:
    """The module's ``limit`` most connected members (relationships inside the module;
    ties by name) and the relationships inside it."""
    members = set(module.entities)
    inside = relationships.filter(pl.col("source").is_in(members) & pl.col("target").is_in(members))
    degree: dict[str, int] = dict.fromkeys(module.entities, 0)
    for source, target in inside.select("source", "target").iter_rows():
        degree[source] += 1
        degree[target] += 1
    return sorted(module.entities, key=lambda n: (-degree[n], n))[:limit], inside


def extractive_summary(shown: list[str], descriptions: dict[str, str]) -> tuple[str, str]:
    """A module's title and summary without an LLM, from its members ranked most
    connected first: the title names the first three; the summary is the first part of
    each member's description, each part once, clipped, while the summary stays within
    the length an LLM summary may have."""
    limit = SUMMARY_SCHEMA["properties"]["summary"]["maxLength"]
    parts: list[str] = []
    for name in shown:
        first = _clip(descriptions[name].split(DESCRIPTION_SEPARATOR)[0])
        if first and first not in parts and len(" ".join([*parts, first])) <= limit:
            parts.append(first)
    return ", ".join(shown[:3]), " ".join(parts) or ", ".join(shown)


def extractive_summaries(modules: Iterable[Module], entities: pl.DataFrame,
                         relationships: pl.DataFrame, limit: int
                         ) -> Iterator[tuple[Module, str, str, bool]]:
    """(module, title, summary, False) for every module, by ``extractive_summary``."""
    descriptions = dict(entities.select("name", "description").iter_rows())
    for module in modules:
        yield (module, *extractive_summary(ranked_members(module, relationships, limit)[0],
                                           descriptions), False)


def summary_prompt(module: Module, entities: pl.DataFrame, relationships: pl.DataFrame,
                   limit: int) -> tuple[str, list[str]]:
    """The prompt for one module and the names it shows, most connected members first."""
    shown, inside = ranked_members(module, relationships, limit)
    described = dict(entities.filter(pl.col("name").is_in(shown))
                     .select("name", "description").iter_rows())
    lines = [f"- {name}: {_clip(described[name])}" for name in shown]
    rels = inside.filter(pl.col("source").is_in(shown) & pl.col("target").is_in(shown)).sort(
        ["strength", "source", "target"], descending=[True, False, False]).head(limit)
    rel_lines = [f"- {s} -- {t}: {_clip(d)}" for s, t, d in
                 rels.select("source", "target", "description").iter_rows()]
    prompt = (f"{SUMMARY_INSTRUCTION}\n\nEntities:\n" + "\n".join(lines)
              + ("\n\nRelationships:\n" + "\n".join(rel_lines) if rel_lines else "")
              + "\n\nJSON:")
    return prompt, shown


def llm_summary(llm: CachedLLM, module: Module, entities: pl.DataFrame,
                relationships: pl.DataFrame, limit: int, *, style: Style
                ) -> tuple[Module, str, str, bool]:
    """(module, title, summary, fell back) from one constrained call; a reply that never
    parses falls back to the module's first members' names and descriptions."""
    prompt, shown = summary_prompt(module, entities, relationships, limit)
    try:
        value, _ = llm.ask_json(prompt, SUMMARY_SCHEMA, style=style, max_tokens=MAX_TOKENS)
        return module, single_spaces(value["title"]), single_spaces(value["summary"]), False
    except InvalidOutput:
        return module, ", ".join(shown[:3]), " ".join(
            entities.filter(pl.col("name").is_in(shown[:3]))["description"]), True
