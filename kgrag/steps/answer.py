"""Steps ``answer``: the LLM answers each question from its retrieved context; and
``answer_from_trace``: the answers a strategy gave while retrieving."""

from __future__ import annotations

import json
from typing import Any

from kgrag.answer import answer
from kgrag.contents.answers import write_answers
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.pipeline.step import Counts, StepContext, step_kind


def answered(config: dict[str, Any], counts: Counts) -> int | None:
    """How many questions get an answer (one LLM call each)."""
    limit, n_questions = config["questions"], counts.questions
    if n_questions is None:
        return limit
    return n_questions if limit is None else min(limit, n_questions)


@step_kind("answer", "2", max_llm_calls=answered)
def answer_questions(ctx: StepContext) -> None:
    questions = read_questions(ctx.input("corpus"))
    retrieved = read_retrieved(ctx.input("retrieve"))
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
    write_answers(ctx.out_dir, rows)


@step_kind("answer_from_trace", "1")
def answer_from_trace(ctx: StepContext) -> None:
    """The answers a strategy gave while retrieving (RAS's Graph-LLM answers from the
    graph token only the loop holds): each question's trace ``answer``; no model call
    here, the retrieve step made and cached it."""
    questions = read_questions(ctx.input("corpus"))
    retrieved = read_retrieved(ctx.input("retrieve"))
    table = questions.join(retrieved, on="question_id", how="inner")
    table = table.head(answered(ctx.config, Counts(questions=table.height, chunks=None)))
    rows = [{"question_id": qid, "answer": json.loads(trace)["answer"], "tokens_in": 0,
             "tokens_out": 0} for qid, trace in zip(table["question_id"], table["trace"])]
    write_answers(ctx.out_dir, rows)
