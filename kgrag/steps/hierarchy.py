"""HugRAG's graph build as steps after the shared extraction (paper §3.1, App. B.1).

``hierarchy``  two-stage canonicalisation of the extracted entities, recursive Leiden
               modules, entity / relationship / module tables, entity vectors — no LLM.
``summarise``  one title and summary per module (``kgrag.graphs.module_summaries``), by
               one constrained LLM call each or, with ``summaries: extractive``, by
               none; embedded in LanceDB, with the LLM's fallbacks counted in the
               manifest.
``gates``      candidate module pairs (topologically distant, semantically related) under
               top-down hierarchical pruning, each checked by one yes / no LLM call, or
               with ``gate_judge: similarity`` by a summary-cosine threshold
               (``kgrag.graphs.gates``); checks, candidates and all module pairs go to
               the manifest.

The LLM options cost one call per module and per check, which adds up to hours for the
thousands of modules of a whole HolisQA domain extracted with ``nlp`` (docs/results.md,
"HugRAG on whole HolisQA domains"); the no-LLM options take seconds.

A graph too small for a hierarchy (no module of two or more entities) is not an
error: the build records the fallback and ``hugrag`` searches entity
neighbourhoods only, as with ``use_hierarchy: false``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import polars as pl

from kgrag.contents.columns import counted
from kgrag.contents.entities import numbered, read_entities, read_relationships
from kgrag.contents.extraction import read_counts, read_extraction
from kgrag.contents.gates import write_gates
from kgrag.contents.hierarchy import read_hierarchy, write_hierarchy
from kgrag.contents.summaries import open_module_vectors, read_summaries, write_summaries
from kgrag.graphs.canonical import canonicalise
from kgrag.graphs.gates import (
    Pair,
    find_gates,
    llm_verdict,
    module_adjacency,
    similarity_judge,
)
from kgrag.graphs.hierarchy import Module, leiden_hierarchy
from kgrag.graphs.module_summaries import extractive_summaries, llm_summary
from kgrag.graphs.salience import Salience, salient_graph
from kgrag.models.llm import CachedLLM
from kgrag.steps.step import StepContext, step_kind


@step_kind("hierarchy", "1")
def build_hierarchy(ctx: StepContext) -> None:
    entities, relationships = read_extraction(ctx.input("extract"), ctx.step.name)
    cfg, embedder, tokenizer = ctx.config, ctx.models.embedder, ctx.models.tokenizer
    started = time.perf_counter()
    canon = canonicalise(entities, relationships, embedder.encode, fuzzy=cfg["fuzzy"],
                         cosine=cfg["cosine"])
    canonicalise_s = time.perf_counter() - started
    entities, relationships = canon.entities, canon.relationships
    if "salient_min_chunks" in cfg:
        extracted = entities.height
        entities, relationships = salient_graph(
            entities, relationships,
            Salience(cfg["salient_min_chunks"], cfg["salient_max_share"],
                     cfg["relationships_per_entity"]),
            read_counts(ctx.input("extract")).height)
        ctx.notes.update(canonical_entities=extracted)
    started = time.perf_counter()
    hierarchy = leiden_hierarchy(
        entities["name"].to_list(),
        list(zip(relationships["source"], relationships["target"],
                 relationships["weight"].cast(pl.Float64))),
        max_cluster_size=cfg["max_cluster_size"], max_levels=cfg["max_levels"],
        seed=cfg["seed"], resolution=cfg.get("resolution", 1.0))
    leiden_s = time.perf_counter() - started

    entities, relationships = numbered(entities, relationships)
    entities = counted(entities.with_columns(
        text=pl.format("{}: {}", "name", "description"),
        module_id=pl.Series([hierarchy.leaf_module_of(n) for n in entities["name"]],
                            dtype=pl.String)), "text", "tokens", tokenizer)
    relationships = counted(relationships.with_columns(
        text=pl.format("{} -- {}: {}", "source", "target", "description")),
        "text", "tokens", tokenizer)
    write_hierarchy(ctx.out_dir, entities, relationships, hierarchy,
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


def llm_calls_unless(option: str, value: str) -> Callable[[dict[str, Any], Any], int | None]:
    """Dry-run bound of a step whose ``option`` set to ``value`` makes no LLM call; with
    the LLM its calls are known only once the hierarchy is built."""
    return lambda config, counts: 0 if config.get(option) == value else None


@step_kind("summarise", "1", max_llm_calls=llm_calls_unless("method", "extractive"))
def summarise(ctx: StepContext) -> None:
    folder = ctx.input("hierarchy")
    hierarchy = read_hierarchy(folder)
    entities, relationships = read_entities(folder), read_relationships(folder)
    limit = ctx.config["summary_entities"]
    written: Iterable[tuple[Module, str, str, bool]]
    if ctx.config.get("method") == "extractive":
        written = extractive_summaries(
            ctx.progress(hierarchy.modules, desc="summarise", unit="module"), entities,
            relationships, limit)
    else:
        def summarise_one(llm: CachedLLM, module: Module) -> tuple[Module, str, str, bool]:
            return llm_summary(llm, module, entities, relationships, limit,
                               style=ctx.config["prompt"])

        written = ctx.map_calls("summariser", summarise_one, hierarchy.modules,
                                desc="summarise", unit="module")
    rows = [{"module_id": module.module_id, "title": title, "summary": summary,
             "text": f"{title}: {summary}", "fallback": fallback}
            for module, title, summary, fallback in written]
    frame = pl.DataFrame(rows, schema={"module_id": pl.String, "title": pl.String,
                                       "summary": pl.String, "text": pl.String,
                                       "fallback": pl.Boolean})
    frame = counted(frame, "text", "tokens", ctx.models.tokenizer)
    write_summaries(ctx.out_dir, frame,
                    ctx.models.embedder.encode(frame["text"].to_list()) if rows else None)
    ctx.notes.update(modules=len(rows),
                     fallback_summaries=frame.filter(pl.col("fallback"))["module_id"].to_list())


@step_kind("gates", "1", max_llm_calls=llm_calls_unless("judge", "similarity"))
def gates(ctx: StepContext) -> None:
    hierarchy = read_hierarchy(ctx.input("hierarchy"))
    relationships = read_relationships(ctx.input("hierarchy"), ["source", "target"])
    summaries = read_summaries(ctx.input("summaries"))
    text = dict(summaries.select("module_id", "text").iter_rows())
    vectors: dict[str, np.ndarray] = {}
    if text:
        ids, matrix = open_module_vectors(ctx.input("summaries")).matrix()
        vectors = dict(zip(ids, matrix))
    if ctx.config.get("judge") == "similarity":
        close = similarity_judge(vectors, ctx.config["threshold"])

        def verdicts(pairs: list[Pair]) -> list[str]:
            return ["yes" if close(a, b) else "no" for a, b in pairs]
    else:
        ask = llm_verdict(text, style=ctx.config["prompt"])

        def verdicts(pairs: list[Pair]) -> list[str]:  # a batch: one compared set
            return ctx.map_calls("judge", ask, pairs, desc="gate checks", unit="check")
    answers: dict[str, int] = {"yes": 0, "no": 0, "other": 0}

    def judge(pairs: list[Pair]) -> list[bool]:
        said = verdicts(pairs)
        answers.update({k: answers[k] + said.count(k) for k in answers})
        return [verdict == "yes" for verdict in said]

    search = find_gates(hierarchy, vectors, module_adjacency(hierarchy, relationships.iter_rows()),
                        judge, top_m=ctx.config["top_m"],
                        min_similarity=ctx.config["min_similarity"])
    write_gates(ctx.out_dir, search.gates, {m.module_id: m.level for m in hierarchy.modules})
    ctx.notes.update(modules=len(hierarchy.modules), gates=len(search.gates),
                     checks=search.checks, candidates=search.candidates,
                     skipped_by_pruning=search.skipped_by_pruning, all_pairs=search.all_pairs,
                     answers=answers)
    if not search.gates:
        ctx.notes["fallback"] = ("no causal gates: " + (
            "no candidate module pairs" if not search.candidates
            else f"none of the {search.checks} checks was answered yes")
            + "; hugrag expands over hierarchy and structure only")
