"""Step ``answer``: the LLM answers each question from its retrieved context."""

from __future__ import annotations

from typing import Any

import polars as pl

from kgrag.answer import answer
from kgrag.pipeline.step import Counts, StepContext, step_kind
from kgrag.steps.corpus import QUESTIONS
from kgrag.steps.retrieve import RETRIEVED

ANSWERS = "answers.parquet"


def answered(config: dict[str, Any], counts: Counts) -> int | None:
    """How many questions get an answer (one LLM call each)."""
    limit, n_questions = config["questions"], counts.questions
    if n_questions is None:
        return limit
    return n_questions if limit is None else min(limit, n_questions)


@step_kind("answer", "2", max_llm_calls=answered)
def answer_questions(ctx: StepContext) -> None:
    questions = pl.read_parquet(ctx.input("corpus") / QUESTIONS)
    retrieved = pl.read_parquet(ctx.input("retrieve") / RETRIEVED)
    table = questions.join(retrieved, on="question_id", how="inner")
    table = table.head(answered(ctx.config, Counts(questions=table.height, chunks=None)))
    llm = ctx.models.llm("answerer")
    rows = []
    for qid, question, context in ctx.progress(
            zip(table["question_id"], table["question"], table["context"]),
            total=table.height, desc="answer", unit="question"):
        text, completion = answer(llm, context, question, max_tokens=ctx.config["max_tokens"],
                                  style=ctx.config["prompt"], length=ctx.config["length"])
        rows.append({"question_id": qid, "answer": text, "tokens_in": completion.tokens_in,
                     "tokens_out": completion.tokens_out})
    pl.DataFrame(rows, schema={"question_id": pl.String, "answer": pl.String,
                               "tokens_in": pl.Int64, "tokens_out": pl.Int64}
                 ).write_parquet(ctx.out_dir / ANSWERS)
