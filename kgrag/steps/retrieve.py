"""Step ``retrieve``: every question through one query strategy → retrieved.parquet.

Question vectors are embedded in one batch before timing starts, so
``retrieval_ms`` measures the strategy itself (search, graph walk, budget
filling), not the encoder; the encoder's speed is a benchmark of its own. LLM
calls a strategy makes while retrieving (HugRAG's causal filter) are timed apart,
as ``llm_ms``, and left out of ``retrieval_ms``. A budget that holds nothing for any
question is an error, not a column of empty contexts. Questions a strategy answered
by its fallback (a ``fallback`` key in the trace: ppr with no linkable entity,
HugRAG with no seed) are counted in the step's notes, and so are those a strategy
decided to answer closed-book (a ``no_retrieval`` trace: RAS's planner), whose empty
context is no budget problem. A strategy with ``questions: N``
retrieves for the first N questions only (the evaluation averages over those). In a spec
that trains a retriever, the questions it trains on are skipped (``held_out``), by every
strategy alike.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.contents.chunks import ROW_GROUP, UNIT_COLUMNS, chunk_frames, read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import write_retrieved
from kgrag.errors import KgragError
from kgrag.memory import give_back
from kgrag.retrieval import STRATEGIES, Resources, load, needs
from kgrag.retrieval.units import Units
from kgrag.steps.step import Counts, StepContext, step_kind
from kgrag.training.split import held_out


def chunk_units(inputs: dict[str, Path]) -> Units | None:
    """The chunks as retrieval units, for a step whose inputs hold a chunks artefact, read
    a row group at a time."""
    if "chunks" not in inputs:
        return None
    return Units.read(chunk_frames(inputs["chunks"], UNIT_COLUMNS, ROW_GROUP))


def load_strategy(step: dict[str, Any], inputs: dict[str, Path], models: Any,
                  units: Units | None = None) -> Any:
    """Build the strategy of a retrieve step's config from its artefact folders (by role);
    ``units``: its ``chunk_units`` where the caller holds them already, else read here."""
    config = step["strategy"]
    declared = STRATEGIES[config["strategy"]]
    llm = models.llm("filter") if declared.uses_llm(config) else None
    resources = Resources(units or chunk_units(inputs), models.tokenizer, llm,
                          step.get("prompt", "completion"),
                          models.embedder_of(step["embedder"]), models.pipeline, models)
    loaded = load(config, {role: inputs[role] for role in needs(config)}, resources)
    # what the load read and let go (the tables a graph is built from: 180 MB of a ppr
    # load at 110,056 chunks) stays in the heap, under what it keeps, until handed back
    give_back()
    return loaded


def filter_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """A strategy that calls the LLM while retrieving: its calls per question (one for
    most) for each question it retrieves for, plus retries."""
    if "llm" not in config:
        return 0
    per_question = STRATEGIES[config["strategy"]["strategy"]].calls_per_question(
        config["strategy"])
    limit = config["strategy"].get("questions")
    if counts.questions is None:
        return None if limit is None else limit * per_question * (1 + config["max_retries"])
    n_questions = counts.questions if limit is None else min(limit, counts.questions)
    return n_questions * per_question * (1 + config["max_retries"])


@step_kind("retrieve", "6", max_llm_calls=filter_calls)
def retrieve(ctx: StepContext) -> None:
    config = ctx.config["strategy"]
    strategy = load_strategy(ctx.config, ctx.inputs, ctx.models)
    questions = read_questions(ctx.input("corpus"))
    if "held_out" in ctx.config:
        kept = held_out(questions["question_id"], ctx.config["held_out"])
        questions = questions.filter(pl.col("question_id").is_in(kept))
    if "questions" in config:
        questions = questions.head(config["questions"])
    texts = questions["question"].to_list()
    vectors = ctx.models.embedder_of(ctx.config["embedder"]).encode(texts)
    rows, fallbacks, closed_book = [], 0, 0
    for qid, text, vector in ctx.progress(zip(questions["question_id"], texts, vectors),
                                          total=len(texts), desc="retrieve", unit="question"):
        started = time.perf_counter()
        context = strategy.retrieve(text, vector)
        elapsed_ms = (time.perf_counter() - started) * 1000
        fallbacks += "fallback" in context.trace
        closed_book += bool(context.trace.get("no_retrieval"))
        rows.append({"question_id": qid, "unit_ids": context.unit_ids,
                     "doc_ids": context.doc_ids, "context": context.text,
                     "context_tokens": context.tokens,
                     "retrieval_ms": elapsed_ms - context.llm_ms, "llm_ms": context.llm_ms,
                     "llm_calls": context.llm_calls, "llm_tokens_in": context.llm_tokens_in,
                     "llm_tokens_out": context.llm_tokens_out,
                     "trace": json.dumps(context.trace, sort_keys=True)})
    if len(rows) > closed_book and not any(row["context_tokens"] for row in rows):
        why = ""
        if "chunks" in ctx.inputs:
            smallest = read_chunks(ctx.input("chunks"), ["context_tokens"]).select(
                pl.col("context_tokens").min()).item()
            why = f" (the smallest chunk has {smallest} tokens)"
        raise KgragError(
            f"{ctx.step.name}: budget_tokens {config['budget_tokens']} holds nothing for any of "
            f"the {len(rows)} questions{why}; raise budget_tokens")
    write_retrieved(ctx.out_dir, rows)
    if fallbacks:
        ctx.notes.update(fallbacks=fallbacks)
    if closed_book:
        ctx.notes.update(closed_book=closed_book)
