"""Step ``evaluate``: one metrics row per query strategy → metrics.json (+ per-question rows)."""

from __future__ import annotations

import json

import polars as pl

from kgrag.eval.report import strategy_row
from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext
from kgrag.steps.answer import ANSWERS
from kgrag.steps.corpus import QUESTIONS
from kgrag.steps.retrieve import RETRIEVED

METRICS = "metrics.json"


@step_kind("evaluate", "3", publish=(METRICS,))
def evaluate(ctx: StepContext) -> None:
    questions = pl.read_parquet(ctx.input("corpus") / QUESTIONS)
    rows = []
    for strategy in ctx.config["strategies"]:
        name = strategy["name"]
        retrieved = pl.read_parquet(ctx.input(f"retrieve.{name}") / RETRIEVED)
        answers_dir = ctx.inputs.get(f"answer.{name}")
        answers = None if answers_dir is None else pl.read_parquet(answers_dir / ANSWERS)
        row = strategy_row(name, strategy["strategy"], ctx.config["metrics"], questions,
                           retrieved, answers)
        rows.append({**row, "params": ctx.config["params"][name]})  # swept values, if any
    result = {"dataset": ctx.config["dataset"], "n_questions": questions.height, "rows": rows}
    (ctx.out_dir / METRICS).write_text(json.dumps(result, indent=2) + "\n")
