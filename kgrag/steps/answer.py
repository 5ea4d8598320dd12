"""Step ``answer``: the LLM answers each question from its retrieved context."""

from __future__ import annotations

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
