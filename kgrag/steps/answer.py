"""Steps ``answer``: the LLM answers each question from its retrieved context; and
``answer_from_trace``: the answers a strategy gave while retrieving.

``answer.mode`` says how: ``free`` generation (the default; each reply's defects mended,
``kgrag.answer.hygiene``, and counted in the notes) or ``extractive`` (the LLM chooses
a span of the context, ``kgrag.answer.extractive``). With ``answer.cite`` the context
is numbered part by part (``kgrag.answer.parts``: a chunk strategy's chunks, any other
strategy's rows, items and text blocks) and each answer's citations are written beside
it (``kgrag.contents.answers``); an extractive answer cites the parts that hold its span.
``answer.context: gold`` answers from each question's supporting documents instead of
what was retrieved: the reader's ceiling apart from retrieval.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import polars as pl

from kgrag.answer import INSUFFICIENT
from kgrag.answer.parts import Part, context_parts
from kgrag.answer.reader import read
from kgrag.contents.answers import write_answers, write_citations
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.errors import KgragError
from kgrag.steps.step import Counts, StepContext, step_kind


def answered(config: dict[str, Any], counts: Counts) -> int | None:
    """How many questions get an answer (one LLM call each)."""
    limit, n_questions = config["questions"], counts.questions
    if n_questions is None:
        return limit
    return n_questions if limit is None else min(limit, n_questions)


def gold_parts(table: pl.DataFrame, chunks: pl.DataFrame) -> list[list[Part]]:
    """Each question's supporting documents as its context: their chunks in document
    order (``answer.context: gold``)."""
    if not any(table["supporting_doc_ids"].to_list()):
        raise KgragError("answer.context: gold answers from each question's supporting "
                         "documents, and no answered question has any: this corpus has no "
                         "supporting labels; answer from the retrieved context instead")
    by_doc: dict[str, list[Part]] = {}
    for chunk_id, doc_id, text in chunks.select("chunk_id", "doc_id", "context").iter_rows():
        by_doc.setdefault(doc_id, []).append(Part(text, chunk_id))
    return [[p for d in docs for p in by_doc.get(d, [])]
            for docs in table["supporting_doc_ids"].to_list()]


@step_kind("answer", "8", max_llm_calls=answered)
def answer_questions(ctx: StepContext) -> None:
    questions = read_questions(ctx.input("corpus"))
    retrieved = read_retrieved(ctx.input("retrieve"))
    table = questions.join(retrieved, on="question_id", how="inner")
    limit = answered(ctx.config, Counts(questions=table.height, chunks=None))
    table = table if limit is None else table.head(limit)
    text_of, doc_of = {}, {}
    if "chunks" in ctx.inputs:  # numbered parts, spans, the supporting documents' chunks
        chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "doc_id", "context"])
        text_of = dict(zip(chunks["chunk_id"], chunks["context"]))
        doc_of = dict(zip(chunks["chunk_id"], chunks["doc_id"]))
    contexts = (gold_parts(table, chunks) if ctx.config.get("context") == "gold" else
                [context_parts(u, c, text_of) for u, c in zip(table["unit_ids"],
                                                              table["context"])])
    layouts = (table["context"] if ctx.config.get("context") != "gold"
               else [None] * table.height)
    llm = ctx.models.llm("answerer")
    embedder = ctx.models.embedder if "embedder" in ctx.config else None  # answer.focus
    kinds: Counter[str]
    rows, citations, kinds = [], [], Counter()
    for qid, question, parts, layout in ctx.progress(
            zip(table["question_id"], table["question"], contexts, layouts),
            total=table.height, desc="answer", unit="question"):
        reply = read(llm, [p.text for p in parts], question, ctx.config, layout, embedder)
        kinds[reply.kind] += 1
        rows.append({"question_id": qid, "answer": reply.text, "tokens_in": reply.tokens_in,
                     "tokens_out": reply.tokens_out})
        shown = [(n, parts[n - 1]) for n in reply.cited]
        citations.append({"question_id": qid,
                          "cited_units": [p.unit_id or f"part {n}" for n, p in shown],
                          "cited_docs": [doc_of.get(p.unit_id or "", "") for _, p in shown],
                          "cited_texts": [p.text for _, p in shown],
                          "numbers": reply.numbers, "shown": len(parts)})
    write_answers(ctx.out_dir, rows)
    ctx.notes.update({f"answers_{kind}": kinds[kind] for kind in sorted(kinds)})
    if ctx.config.get("cite"):
        write_citations(ctx.out_dir, citations)
        free = ctx.config.get("mode", "free") == "free"
        ctx.notes.update(cited=sum(bool(c["cited_units"]) for c in citations),
                         uncited=sum(not c["cited_units"] for c in citations),
                         # neither a number in brackets nor the escape: the form did not hold
                         unparsed=sum(free and not c["numbers"] and r["answer"] != INSUFFICIENT
                                      for c, r in zip(citations, rows)))


@step_kind("answer_from_trace", "1")
def answer_from_trace(ctx: StepContext) -> None:
    """The answers a strategy gave while retrieving (RAS's Graph-LLM answers from the
    graph token only the loop holds): each question's trace ``answer``; no model call
    here, the retrieve step made and cached it."""
    questions = read_questions(ctx.input("corpus"))
    retrieved = read_retrieved(ctx.input("retrieve"))
    table = questions.join(retrieved, on="question_id", how="inner")
    limit = answered(ctx.config, Counts(questions=table.height, chunks=None))
    table = table if limit is None else table.head(limit)
    rows = [{"question_id": qid, "answer": json.loads(trace)["answer"], "tokens_in": 0,
             "tokens_out": 0} for qid, trace in zip(table["question_id"], table["trace"])]
    write_answers(ctx.out_dir, rows)
