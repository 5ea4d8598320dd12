"""Step ``retrieve``: every question through one query strategy → retrieved.parquet.

Question vectors are embedded in one batch before timing starts, so
``retrieval_ms`` measures the strategy itself (search, graph walk, budget
filling), not the encoder; the encoder's speed is a benchmark of its own.
"""

from __future__ import annotations

import time

import polars as pl

from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext
from kgrag.retrieval import STRATEGIES
from kgrag.retrieval.units import Units
from kgrag.steps.corpus import QUESTIONS

RETRIEVED = "retrieved.parquet"


@step_kind("retrieve", "1")
def retrieve(ctx: StepContext) -> None:
    cfg = ctx.config["strategy"]
    strategy_type = STRATEGIES[cfg["strategy"]]
    units = Units.load(ctx.input("chunks"))
    strategy = strategy_type.load(cfg, {n: ctx.input(n) for n in strategy_type.needs}, units)
    questions = pl.read_parquet(ctx.input("corpus") / QUESTIONS)
    texts = questions["question"].to_list()
    vectors = ctx.models.embedder.encode(texts)
    rows = []
    for qid, text, vector in ctx.progress(zip(questions["question_id"], texts, vectors),
                                          total=len(texts), desc=f"retrieve {cfg['name']}"):
        started = time.perf_counter()
        ids = strategy.retrieve(text, vector)
        elapsed_ms = (time.perf_counter() - started) * 1000
        rows.append({"question_id": qid, "unit_ids": ids,
                     "doc_ids": [units.doc[i] for i in ids],
                     "context_tokens": sum(units.tokens[i] for i in ids),
                     "retrieval_ms": elapsed_ms})
    pl.DataFrame(rows, schema={"question_id": pl.String, "unit_ids": pl.List(pl.String),
                               "doc_ids": pl.List(pl.String), "context_tokens": pl.Int64,
                               "retrieval_ms": pl.Float64}
                 ).write_parquet(ctx.out_dir / RETRIEVED)
