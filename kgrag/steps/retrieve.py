"""Step ``retrieve``: every question through one query strategy → retrieved.parquet.

Question vectors are embedded in one batch before timing starts, so
``retrieval_ms`` measures the strategy itself (search, graph walk, budget
filling), not the encoder; the encoder's speed is a benchmark of its own.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext
from kgrag.retrieval import STRATEGIES, Resources
from kgrag.retrieval.units import CHUNKS_FILE, Units
from kgrag.steps.corpus import QUESTIONS

RETRIEVED = "retrieved.parquet"
SCHEMA = {"question_id": pl.String, "unit_ids": pl.List(pl.String),
          "doc_ids": pl.List(pl.String), "context": pl.String, "context_tokens": pl.Int64,
          "retrieval_ms": pl.Float64}


def load_strategy(config: dict[str, Any], inputs: dict[str, Path], models: Any) -> Any:
    """Build the configured strategy from its artefact folders (by role)."""
    strategy_type = STRATEGIES[config["strategy"]]
    resources = Resources(Units.load(inputs["chunks"] / CHUNKS_FILE), models.tokenizer)
    artefacts = {role: inputs[role] for role in strategy_type.needs(config)}
    return strategy_type.load(config, artefacts, resources)


@step_kind("retrieve", "2")
def retrieve(ctx: StepContext) -> None:
    config = ctx.config["strategy"]
    strategy = load_strategy(config, ctx.inputs, ctx.models)
    questions = pl.read_parquet(ctx.input("corpus") / QUESTIONS)
    texts = questions["question"].to_list()
    vectors = ctx.models.embedder.encode(texts)
    rows = []
    for qid, text, vector in ctx.progress(zip(questions["question_id"], texts, vectors),
                                          total=len(texts), desc=f"retrieve {config['name']}"):
        started = time.perf_counter()
        context = strategy.retrieve(text, vector)
        elapsed_ms = (time.perf_counter() - started) * 1000
        rows.append({"question_id": qid, "unit_ids": context.unit_ids,
                     "doc_ids": context.doc_ids, "context": context.text,
                     "context_tokens": context.tokens, "retrieval_ms": elapsed_ms})
    pl.DataFrame(rows, schema=SCHEMA).write_parquet(ctx.out_dir / RETRIEVED)
