"""HugRAG's graph build as steps after the shared extraction (paper §3.1, App. B.1).

``hierarchy``  two-stage canonicalisation of the extracted entities, recursive Leiden
               modules, entity / relationship / module tables, entity vectors — no LLM.
``summarise``  one constrained LLM call per module → JSON ``{title, summary}``, embedded
               in LanceDB; a summary that never parses falls back to the module's
               entity names and descriptions, counted in the manifest. With
               ``summaries: extractive`` no LLM: the title names the most connected
               members, the summary is their first sentences (``extractive_summary``).
``gates``      candidate module pairs (topologically distant, semantically related) under
               top-down hierarchical pruning, each checked by one yes / no LLM call, or
               with ``gate_judge: similarity`` by a summary-cosine threshold; checks,
               candidates and all module pairs go to the manifest.

The LLM options cost one call per module and per check: about 3 s and 1 s with SmolLM2
on 2 cores, hours for the thousands of modules of a whole HolisQA domain extracted with
``nlp`` (README, "HugRAG on whole HolisQA domains"); the no-LLM options take seconds.

A graph too small for a hierarchy (no module of two or more entities) is not an
error: the build records the fallback and ``hugrag`` searches entity
neighbourhoods only, as with ``use_hierarchy: false``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl

from kgrag.graphs.canonical import canonicalise
from kgrag.graphs.gates import find_gates, module_adjacency, similarity_judge
from kgrag.graphs.hierarchy import Hierarchy, Module, leiden_hierarchy
from kgrag.graphs.merge import DESCRIPTION_SEPARATOR
from kgrag.models.llm import InvalidOutput
from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext
from kgrag.progress import Progress
from kgrag.retrieval.hugrag import (
    ENTITIES_FILE,
    GATES_FILE,
    MODULE_TABLE,
    MODULES_FILE,
    RELATIONSHIPS_FILE,
    SUMMARIES_FILE,
)
from kgrag.retrieval.local_search import ENTITY_TABLE
from kgrag.steps.skeleton import read_extraction
from kgrag.store.vectors import VectorTable

DESCRIPTION_CHARS = 200  # of one entity / relationship description in a summary prompt

SUMMARY_SCHEMA = {
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
GATE_INSTRUCTION = (
    "Two groups of findings from research articles are summarised below. Is there a plausible "
    "causal or logical connection between them: does one cause, enable, influence or explain "
    "the other? Answer yes or no."
)
YES_NO = 'root ::= "yes" | "no"'


@step_kind("hierarchy", "1")
def build_hierarchy(ctx: StepContext) -> None:
    entities, relationships = read_extraction(ctx)
    cfg, embedder, tokenizer = ctx.config, ctx.models.embedder, ctx.models.tokenizer
    started = time.perf_counter()
    canon = canonicalise(entities, relationships, embedder.encode, fuzzy=cfg["fuzzy"],
                         cosine=cfg["cosine"])
    canonicalise_s = time.perf_counter() - started
    entities, relationships = canon.entities, canon.relationships
    started = time.perf_counter()
    hierarchy = leiden_hierarchy(
        entities["name"].to_list(),
        list(zip(relationships["source"], relationships["target"],
                 relationships["weight"].cast(pl.Float64))),
        max_cluster_size=cfg["max_cluster_size"], max_levels=cfg["max_levels"],
        seed=cfg["seed"])
    leiden_s = time.perf_counter() - started

    entities = entities.with_columns(
        entity_id=pl.format("E{}", pl.int_range(1, pl.len() + 1)),
        chunk_ids=pl.col("source_chunk_ids"),
        text=pl.format("{}: {}", "name", "description"),
        module_id=pl.Series([hierarchy.leaf_module_of(n) for n in entities["name"]],
                            dtype=pl.String))
    entities = entities.with_columns(
        tokens=pl.Series(tokenizer.count_many(entities["text"].to_list()), dtype=pl.Int64))
    relationships = relationships.with_columns(
        relationship_id=pl.format("R{}", pl.int_range(1, pl.len() + 1)),
        chunk_ids=pl.col("source_chunk_ids"),
        text=pl.format("{} -- {}: {}", "source", "target", "description"))
    relationships = relationships.with_columns(
        tokens=pl.Series(tokenizer.count_many(relationships["text"].to_list()), dtype=pl.Int64))
    entities.write_parquet(ctx.out_dir / ENTITIES_FILE)
    relationships.write_parquet(ctx.out_dir / RELATIONSHIPS_FILE)
    modules_frame(hierarchy).write_parquet(ctx.out_dir / MODULES_FILE)
    VectorTable.create(ctx.out_dir, ENTITY_TABLE, entities["entity_id"].to_list(),
                       embedder.encode(entities["text"].to_list()))
    ctx.notes.update(
        nodes=entities.height, edges=relationships.height, modules=len(hierarchy.modules),
        modules_per_level={f"L{k}": v for k, v in sorted(hierarchy.levels().items())},
        unclustered_entities=len(hierarchy.unclustered), oversized_modules=hierarchy.oversized,
        fuzzy_merges=canon.fuzzy_merges, embedding_merges=canon.embedding_merges,
        canonicalise_s=round(canonicalise_s, 3), leiden_s=round(leiden_s, 3))
    if not hierarchy.modules:
        ctx.notes["fallback"] = (
            f"graph too small for a hierarchy ({entities.height} entities, "
            f"{relationships.height} relationships form no module of two or more): hugrag "
            "searches entity neighbourhoods only")


def modules_frame(hierarchy: Hierarchy) -> pl.DataFrame:
    return pl.DataFrame(
        [{"module_id": m.module_id, "level": m.level, "parent": m.parent,
          "children": list(m.children), "entities": list(m.entities)}
         for m in hierarchy.modules],
        schema={"module_id": pl.String, "level": pl.Int64, "parent": pl.String,
                "children": pl.List(pl.String), "entities": pl.List(pl.String)})


def read_hierarchy(folder: Any) -> Hierarchy:
    """The module tree back from ``modules.parquet`` (what the later steps need of it)."""
    modules = pl.read_parquet(folder / MODULES_FILE)
    return Hierarchy(
        modules=[Module(module_id=m, level=level, parent=parent, children=tuple(children),
                        entities=tuple(members))
                 for m, level, parent, children, members in modules.iter_rows()],
        unclustered=(), oversized=0)


def _clip(text: str) -> str:
    text = " ".join(text.split())
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
    each member's description (with ``nlp`` extraction, the sentence that first mentions
    it), each part once, clipped, while the summary stays within the length an LLM
    summary may have."""
    limit = SUMMARY_SCHEMA["properties"]["summary"]["maxLength"]
    parts: list[str] = []
    for name in shown:
        first = _clip(descriptions[name].split(DESCRIPTION_SEPARATOR)[0])
        if first and first not in parts and len(" ".join([*parts, first])) <= limit:
            parts.append(first)
    return ", ".join(shown[:3]), " ".join(parts) or ", ".join(shown)


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


def llm_calls_unless(option: str, value: str) -> Callable[[dict[str, Any], Any], int | None]:
    """Dry-run bound of a step whose ``option`` set to ``value`` makes no LLM call; with
    the LLM its calls are known only once the hierarchy is built."""
    return lambda config, counts: 0 if config.get(option) == value else None


@step_kind("summarise", "1", max_llm_calls=llm_calls_unless("method", "extractive"))
def summarise(ctx: StepContext) -> None:
    folder = ctx.input("hierarchy")
    hierarchy = read_hierarchy(folder)
    entities = pl.read_parquet(folder / ENTITIES_FILE)
    relationships = pl.read_parquet(folder / RELATIONSHIPS_FILE)
    modules = ctx.progress(hierarchy.modules, total=len(hierarchy.modules), desc="summarise",
                           unit="module")
    limit = ctx.config["summary_entities"]
    if ctx.config.get("method") == "extractive":
        descriptions = dict(entities.select("name", "description").iter_rows())
        written = ((m, *extractive_summary(ranked_members(m, relationships, limit)[0],
                                           descriptions), False) for m in modules)
    else:
        written = _llm_summaries(ctx, modules, entities, relationships, limit)
    rows = [{"module_id": module.module_id, "title": title, "summary": summary,
             "text": f"{title}: {summary}", "fallback": fallback}
            for module, title, summary, fallback in written]
    frame = pl.DataFrame(rows, schema={"module_id": pl.String, "title": pl.String,
                                       "summary": pl.String, "text": pl.String,
                                       "fallback": pl.Boolean})
    frame = frame.with_columns(tokens=pl.Series(
        ctx.models.tokenizer.count_many(frame["text"].to_list()), dtype=pl.Int64))
    frame.write_parquet(ctx.out_dir / SUMMARIES_FILE)
    if rows:
        VectorTable.create(ctx.out_dir, MODULE_TABLE, frame["module_id"].to_list(),
                           ctx.models.embedder.encode(frame["text"].to_list()))
    ctx.notes.update(modules=len(rows),
                     fallback_summaries=frame.filter(pl.col("fallback"))["module_id"].to_list())


def _llm_summaries(ctx: StepContext, modules: Iterable[Module], entities: pl.DataFrame,
                   relationships: pl.DataFrame, limit: int
                   ) -> Iterator[tuple[Module, str, str, bool]]:
    """(module, title, summary, fell back) from one constrained extraction-LLM call per
    module; a reply that never parses falls back to its first members' descriptions."""
    llm, style = ctx.models.extraction_llm, ctx.config["prompt"]
    for module in modules:
        prompt, shown = summary_prompt(module, entities, relationships, limit)
        try:
            value, _ = llm.ask_json(prompt, SUMMARY_SCHEMA, style=style, max_tokens=256)
            yield module, " ".join(value["title"].split()), " ".join(value["summary"].split()), \
                False
        except InvalidOutput:
            yield module, ", ".join(shown[:3]), " ".join(
                entities.filter(pl.col("name").is_in(shown[:3]))["description"]), True


def _llm_verdict(ctx: StepContext, text: dict[str, str]) -> Callable[[str, str], str]:
    """The extraction LLM's yes / no on two modules' summaries, under a grammar; a reply
    that is neither (a model that ignores grammars) is "other", read as no."""
    llm, style = ctx.models.extraction_llm, ctx.config["prompt"]

    def verdict(a: str, b: str) -> str:
        prompt = f"{GATE_INSTRUCTION}\n\nGroup A: {text[a]}\n\nGroup B: {text[b]}\n\nAnswer:"
        reply = llm.ask(prompt, style=style, max_tokens=2, grammar=YES_NO).text.strip().lower()
        return reply if reply in ("yes", "no") else "other"

    return verdict


@step_kind("gates", "1", max_llm_calls=llm_calls_unless("judge", "similarity"))
def gates(ctx: StepContext) -> None:
    hierarchy = read_hierarchy(ctx.input("hierarchy"))
    relationships = pl.read_parquet(ctx.input("hierarchy") / RELATIONSHIPS_FILE,
                                    columns=["source", "target"])
    summaries = pl.read_parquet(ctx.input("summaries") / SUMMARIES_FILE)
    text = dict(summaries.select("module_id", "text").iter_rows())
    vectors: dict[str, np.ndarray] = {}
    if text:
        ids, matrix = VectorTable.open(ctx.input("summaries"), MODULE_TABLE).matrix()
        vectors = dict(zip(ids, matrix))
    if ctx.config.get("judge") == "similarity":
        close = similarity_judge(vectors, ctx.config["threshold"])
        verdict_of = lambda a, b: "yes" if close(a, b) else "no"
    else:
        verdict_of = _llm_verdict(ctx, text)
    answers: dict[str, int] = {"yes": 0, "no": 0, "other": 0}
    checked = Progress("gate checks", unit="check")  # their number shows as the search goes

    def judge(a: str, b: str) -> bool:
        checked.tick()
        verdict = verdict_of(a, b)
        answers[verdict] += 1
        return verdict == "yes"

    search = find_gates(hierarchy, vectors, module_adjacency(hierarchy, relationships.iter_rows()),
                        judge, top_m=ctx.config["top_m"],
                        min_similarity=ctx.config["min_similarity"])
    checked.close()
    level = {m.module_id: m.level for m in hierarchy.modules}
    pl.DataFrame({"a": [a for a, _ in search.gates], "b": [b for _, b in search.gates],
                  "level_a": [level[a] for a, _ in search.gates],
                  "level_b": [level[b] for _, b in search.gates]},
                 schema={"a": pl.String, "b": pl.String, "level_a": pl.Int64,
                         "level_b": pl.Int64}).write_parquet(ctx.out_dir / GATES_FILE)
    ctx.notes.update(modules=len(hierarchy.modules), gates=len(search.gates),
                     checks=search.checks, candidates=search.candidates,
                     skipped_by_pruning=search.skipped_by_pruning, all_pairs=search.all_pairs,
                     answers=answers)
    if not search.gates:
        ctx.notes["fallback"] = ("no causal gates: " + (
            "no candidate module pairs" if not search.candidates
            else f"none of the {search.checks} checks was answered yes")
            + "; hugrag expands over hierarchy and structure only")
