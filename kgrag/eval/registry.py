"""The metrics a spec's ``evaluate.metrics`` may name, each registered once with what it
reads.

A strategy metric scores one strategy's run (``StrategyRun``) as one mean, over the
questions it applies to; a build metric adds columns to the row of every graph build it
applies to. The ``evaluate`` step looks each requested name up here and loads an input
only when a requested metric reads it, so a new metric (Hit, Macro-F1) is one function
registered with ``@metric``; the schema's ``evaluate.metrics`` pattern names the same
set (a test holds them equal).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from kgrag.answer.matching import exact_match, f1_score
from kgrag.errors import KgragError
from kgrag.eval.builds import extraction_figures
from kgrag.eval.gold import gold_scores
from kgrag.eval.metrics import (
    AnswerCounts,
    Span,
    answer_coverage,
    answer_lines,
    citation_precision,
    citation_recall,
    context_recall,
    covers,
    hit,
    micro_f1,
    recall_at_k,
)

Reads = Literal["answers", "citations", "context", "documents", "spans", "extraction"]
"""What a metric reads besides the questions: the generated answers; the units they
cite (``answer.cite``); the retrieved context text; the retrieved documents in rank
order; the retrieved chunks' and the gold sentences' spans (``EvidenceSpans``); or, for
a build metric, one build's extraction (``ExtractionBuild``)."""


@dataclass(frozen=True)
class EvidenceSpans:
    """Where chunks and gold sentences sit in their documents: id → (doc_id, start, end).

    ``context_recall`` compares these instead of texts, so it is exact and
    needs neither an LLM nor string matching.
    """

    chunks: Mapping[str, Span]
    sentences: Mapping[str, Span]

    @classmethod
    def from_frames(cls, chunks: pl.DataFrame, sentences: pl.DataFrame) -> EvidenceSpans:
        """Build from the chunks table and the corpus' sentences table (both carry
        ``doc_id``, ``start``, ``end`` and their own id column)."""

        def spans(frame: pl.DataFrame, key: str) -> dict[str, Span]:
            return dict(zip(frame[key].to_list(),
                            zip(frame["doc_id"].to_list(), frame["start"].to_list(),
                                frame["end"].to_list())))

        return cls(spans(chunks, "chunk_id"), spans(sentences, "sentence_id"))


@dataclass(frozen=True)
class StrategyRun:
    """What a strategy metric scores: the questions joined with what the strategy
    retrieved for them (``table``), the answered ones as (answer, gold answers) pairs,
    the spans, present when a requested metric reads them, and, for answers given with
    ``answer.cite``, each answered question's cited documents and supporting documents
    (``cited``; None without citations) and its cited parts' texts and gold answers
    (``cited_texts``; None for citations written before their texts were kept)."""

    table: pl.DataFrame
    answered: list[tuple[str, list[str]]]
    spans: EvidenceSpans | None
    cited: list[tuple[list[str], list[str]]] | None = None
    cited_texts: list[tuple[list[str], list[str]]] | None = None


@dataclass(frozen=True)
class ExtractionBuild:
    """What a build metric reads of one build's extract step: its per-chunk counts, its
    wall seconds and LLM tokens (None when its record is unknown), the chunks it
    extracted (id → text), its merged tables, read only by a metric that asks for them
    (``tables()``: a whole domain's are large), and the corpus' gold triples."""

    counts: pl.DataFrame
    wall_s: float | None
    llm_tokens: int | None
    chunks: Mapping[str, str]
    tables: Callable[[], tuple[pl.DataFrame, pl.DataFrame]]  # (entities, relationships)
    triples: pl.DataFrame


@dataclass(frozen=True)
class Metric:
    """A registered metric. ``name`` ending in ``@`` is a family taking a cut-off
    (``recall@5``), passed to ``score`` as ``k``; ``gold`` names the questions column
    it reads, how messages call it and where a corpus gets it, for metrics that only
    some corpora support."""

    name: str
    reads: Reads
    score: Callable[..., Any]
    gold: tuple[str, str, str] | None = None

    @property
    def per_build(self) -> bool:
        return self.reads == "extraction"


METRICS: dict[str, Metric] = {}


def metric(name: str, reads: Reads, gold: tuple[str, str, str] | None = None
           ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as metric ``name``."""

    def register(score: Callable[..., Any]) -> Callable[..., Any]:
        METRICS[name] = Metric(name, reads, score, gold)
        return score

    return register


def lookup(name: str) -> tuple[Metric, int | None]:
    """The metric a spec names, and its cut-off: ``recall@5`` → (``recall@``, 5)."""
    family, at, k = name.partition("@")
    return METRICS[family + at], int(k) if at else None


def score_strategy(name: str, run: StrategyRun) -> float | None:
    """Strategy metric ``name`` of ``run``."""
    found, k = lookup(name)
    return found.score(run) if k is None else found.score(run, k=k)


@metric("em", "answers")
def _exact_match(run: StrategyRun) -> float | None:
    return _mean([exact_match(a, g) for a, g in run.answered])


@metric("f1", "answers")
def _f1(run: StrategyRun) -> float | None:
    return _mean([f1_score(a, g) for a, g in run.answered])


@metric("citation_precision", "citations",
        gold=("supporting_doc_ids", "supporting documents",
              "a questions file lists a question's supporting document ids in 'supporting'"))
def _citation_precision(run: StrategyRun) -> float | None:
    """Document-level: the mean share of an answer's cited units whose document supports
    the question, over the answers that cite something, whatever the unit says; not
    reported without citations."""
    if run.cited is None:
        return None
    values = [citation_precision(c, s) for c, s in run.cited]
    return _mean([v for v in values if v is not None])


@metric("citation_precision_answer", "citations")
def _citation_precision_answer(run: StrategyRun) -> float | None:
    """The mean share of an answer's cited parts that hold a gold answer (as ``covers``
    finds it), over the answers that cite something: a citation that holds, where
    ``citation_precision`` accepts any unit of a supporting document."""
    if run.cited_texts is None:
        return None
    return _mean([sum(covers(t, golds) for t in texts) / len(texts)
                  for texts, golds in run.cited_texts if texts])


@metric("citation_recall", "citations",
        gold=("supporting_doc_ids", "supporting documents",
              "a questions file lists a question's supporting document ids in 'supporting'"))
def _citation_recall(run: StrategyRun) -> float | None:
    """The mean share of a question's supporting documents its answer cites."""
    if run.cited is None:
        return None
    values = [citation_recall(c, s) for c, s in run.cited]
    return _mean([v for v in values if v is not None])


@metric("cited", "citations")
def _cited(run: StrategyRun) -> float | None:
    """The share of answers citing at least one unit they were shown (an answer without
    a valid citation counts here, and only here)."""
    return None if run.cited is None else _mean([float(bool(c)) for c, _ in run.cited])


@metric("coverage", "context")
def _coverage(run: StrategyRun) -> float | None:
    return _mean([covers(c, g) for c, g in zip(run.table["context"],
                                               run.table["answers"].to_list())])


@metric("recall@", "documents", gold=("supporting_doc_ids", "supporting documents",
                                      ("a questions file lists a question's supporting "
                                      "document ids in 'supporting'")))
def _recall(run: StrategyRun, k: int) -> float | None:
    values = [recall_at_k(d, s, k) for d, s in zip(run.table["doc_ids"].to_list(),
                                                   run.table["supporting_doc_ids"].to_list())]
    return _mean([v for v in values if v is not None])


@metric("iterations", "context")
def _iterations(run: StrategyRun) -> float | None:
    """Mean retrieval iterations per question of an iterative strategy (ras: its trace's
    ``iterations``); not reported for a strategy that does not iterate."""
    values = [trace["iterations"] for trace in map(json.loads, run.table["trace"])
              if "iterations" in trace]
    return _mean(values)


@metric("context_recall", "spans", gold=("gold_sentence_ids", "gold sentences",
                                          "HolisQA's questions carry them"))
def _context_recall(run: StrategyRun) -> float | None:
    """Mean context recall over the questions with gold sentences; retrieved ids that are
    not chunks (KET-RAG sub-chunks, for instance) carry no span and are ignored."""
    spans = run.spans
    if spans is None:
        raise ValueError("metric context_recall needs the chunk and sentence spans")
    values = []
    for unit_ids, gold in zip(run.table["unit_ids"].to_list(),
                              run.table["gold_sentence_ids"].to_list()):
        missing = [sentence_id for sentence_id in gold if sentence_id not in spans.sentences]
        if missing:
            raise KgragError(
                f"gold sentence ids {', '.join(missing[:3])} are in questions.parquet but not "
                "in sentences.parquet of the same corpus step; rerun it with --force corpus"
            )
        value = context_recall([spans.chunks[u] for u in unit_ids if u in spans.chunks],
                               [spans.sentences[sentence_id] for sentence_id in gold])
        if value is not None:
            values.append(value)
    return _mean(values)


@metric("hit", "answers")
def _hit(run: StrategyRun) -> float | None:
    """A gold answer in any ``ans:`` line (KGQA)."""
    return _mean([hit(answer_lines(a), g) for a, g in run.answered])


@metric("hit@", "answers")
def _hit_at(run: StrategyRun, k: int) -> float | None:
    """A gold answer in one of the first k ``ans:`` lines (hit@1: the first)."""
    return _mean([hit(answer_lines(a), g, k) for a, g in run.answered])


@metric("macro_f1", "answers")
def _macro_f1(run: StrategyRun) -> float | None:
    """The mean per-question F1 of the ``ans:`` lines against the gold answers."""
    return _mean([AnswerCounts.of(answer_lines(a), g).f1() for a, g in run.answered])


@metric("micro_f1", "answers")
def _micro_f1(run: StrategyRun) -> float | None:
    """F1 over the counts summed across the questions."""
    if not run.answered:
        return None
    return round(micro_f1([AnswerCounts.of(answer_lines(a), g) for a, g in run.answered]), 4)


@metric("answer_coverage", "context")
def _answer_coverage(run: StrategyRun) -> float | None:
    """The mean share of a question's gold answers that its context names (for KGQA:
    the answer entities among the retrieved triples handed to the LLM)."""
    return _mean([answer_coverage(c, g) for c, g in zip(run.table["context"],
                                                        run.table["answers"].to_list())])


@metric("extraction", "extraction")
def _extraction(build: ExtractionBuild) -> dict[str, Any]:
    """What the extraction made per chunk and how fast and, where the corpus has gold
    triples, their recall; without them the row says ``gold_triples: 0``."""
    row = extraction_figures(build.counts, build.wall_s, build.llm_tokens)
    if build.triples.is_empty():
        return row | {"gold_triples": 0}
    return row | gold_scores(build.triples, build.chunks, *build.tables()).as_row()


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
