"""Steps ``answer``: the LLM answers each question from its retrieved context; and
``answer_from_trace``: the answers a strategy gave while retrieving.

With ``answer.cite`` the context is the retrieved chunks numbered in rank order, and
each answer's citations are written beside it (``kgrag.contents.answers``). That needs
a strategy whose context is exactly its chunks, one after another; a strategy that
hands the LLM something else (a KG skeleton's triples, HugRAG's modules) is refused
with a message, its retrieval kept.
"""

from __future__ import annotations

import json
from typing import Any

from kgrag.answer import INSUFFICIENT, answer, cited_answer, units_to_cite
from kgrag.contents.answers import write_answers, write_citations
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.steps.step import Counts, StepContext, step_kind


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
    if ctx.config.get("cite"):  # absent from specs written before citations
        _answer_citing(ctx, table, llm)
        return
    rows = []
    for qid, question, context in ctx.progress(
            zip(table["question_id"], table["question"], table["context"]),
            total=table.height, desc="answer", unit="question"):
        text, completion = answer(llm, context, question, max_tokens=ctx.config["max_tokens"],
                                  style=ctx.config["prompt"], length=ctx.config["length"])
        rows.append({"question_id": qid, "answer": text, "tokens_in": completion.tokens_in,
                     "tokens_out": completion.tokens_out})
    write_answers(ctx.out_dir, rows)


def _answer_citing(ctx: StepContext, table, llm) -> None:
    """Each question answered from its numbered chunks, with the chunks it cites."""
    chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "doc_id", "context"])
    text_of = dict(zip(chunks["chunk_id"], chunks["context"]))
    doc_of = dict(zip(chunks["chunk_id"], chunks["doc_id"]))
    rows, citations = [], []
    for qid, question, units, context in ctx.progress(
            zip(table["question_id"], table["question"], table["unit_ids"], table["context"]),
            total=table.height, desc="answer", unit="question"):
        shown = units_to_cite(units, context, text_of, ctx.step.name.partition(".")[2])
        cited, completion = cited_answer(llm, shown, question,
                                         max_tokens=ctx.config["max_tokens"],
                                         style=ctx.config["prompt"],
                                         length=ctx.config["length"])
        rows.append({"question_id": qid, "answer": cited.text,
                     "tokens_in": completion.tokens_in, "tokens_out": completion.tokens_out})
        cited_units = [units[n - 1] for n in cited.cited]
        citations.append({"question_id": qid, "cited_units": cited_units,
                          "cited_docs": [doc_of[u] for u in cited_units],
                          "numbers": cited.numbers, "shown": len(units)})
    write_answers(ctx.out_dir, rows)
    write_citations(ctx.out_dir, citations)
    ctx.notes.update(cited=sum(bool(c["cited_units"]) for c in citations),
                     uncited=sum(not c["cited_units"] for c in citations),
                     # neither a number in brackets nor the escape: the form did not hold
                     unparsed=sum(not c["numbers"] and r["answer"] != INSUFFICIENT
                                  for c, r in zip(citations, rows)))


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
