"""Results rows (one per query strategy) and their printed table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from kgrag.errors import KgragError
from kgrag.eval.metrics import (
    Span,
    context_recall,
    covers,
    exact_match,
    f1_score,
    percentile,
    recall_at_k,
)


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


def strategy_row(name: str, method: str, metrics: Sequence[str], questions: pl.DataFrame,
                 retrieved: pl.DataFrame, answers: pl.DataFrame | None,
                 spans: EvidenceSpans | None = None) -> dict[str, Any]:
    """Mean metrics of one strategy over the questions it retrieved for.

    Answer metrics (EM, F1) average over the answered questions only; LLM
    figures are the cost of the method's requests, whether or not the cache
    served them (the manifest records real model calls), retrieval's own calls
    (HugRAG's causal filter) included. ``spans`` is needed
    only for ``context_recall``, which averages over the questions that have
    gold sentences.
    """
    table = questions.join(retrieved, on="question_id", how="inner")
    golds = table["answers"].to_list()
    row: dict[str, Any] = {"strategy": name, "method": method, "n_retrieved": table.height}
    answer_of = {} if answers is None else dict(zip(answers["question_id"], answers["answer"]))
    answered = [(answer_of[q], g) for q, g in zip(table["question_id"], golds) if q in answer_of]
    row["n_answered"] = len(answered)
    for metric in metrics:
        if metric == "em":
            row["em"] = _mean([exact_match(a, g) for a, g in answered])
        elif metric == "f1":
            row["f1"] = _mean([f1_score(a, g) for a, g in answered])
        elif metric == "coverage":
            row["coverage"] = _mean([covers(c, g) for c, g in zip(table["context"], golds)])
        elif metric == "context_recall":
            row["context_recall"] = _context_recall(table, spans)
        else:
            k = int(metric.split("@", 1)[1])
            values = [recall_at_k(d, s, k) for d, s in zip(table["doc_ids"].to_list(),
                                                           table["supporting_doc_ids"].to_list())]
            row[metric] = _mean([v for v in values if v is not None])
    latencies = table["retrieval_ms"].to_list()
    row.update(
        retrieval_ms_p50=round(percentile(latencies, 50), 3),
        retrieval_ms_p95=round(percentile(latencies, 95), 3),
        retrieval_llm_ms_p50=round(percentile(table["llm_ms"].to_list(), 50), 3),
        context_tokens_mean=round(float(table["context_tokens"].mean() or 0.0), 1),
        llm_calls=int(table["llm_calls"].sum()) + (0 if answers is None else answers.height),
        llm_tokens_in=int(table["llm_tokens_in"].sum())
        + (0 if answers is None else int(answers["tokens_in"].sum())),
        llm_tokens_out=int(table["llm_tokens_out"].sum())
        + (0 if answers is None else int(answers["tokens_out"].sum())),
    )
    row["llm_calls_per_query"] = round(row["llm_calls"] / max(1, table.height), 3)
    return row


def _context_recall(table: pl.DataFrame, spans: EvidenceSpans | None) -> float | None:
    """Mean context recall over the questions with gold sentences; retrieved ids that are
    not chunks (KET-RAG sub-chunks, for instance) carry no span and are ignored."""
    if spans is None:
        raise ValueError("metric context_recall needs the chunk and sentence spans")
    values = []
    for unit_ids, gold in zip(table["unit_ids"].to_list(), table["gold_sentence_ids"].to_list()):
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


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


COLUMNS = ("strategy", "em", "f1", "coverage", "recall@", "context_recall", "reachability",
           "reachability_no_gates", "gold_coverage", "gold_coverage_no_gates", "min_hops",
           "min_hops_no_gates", "context_tokens_mean", "retrieval_ms_p50", "retrieval_ms_p95",
           "retrieval_llm_ms_p50", "llm_calls_per_query", "llm_tokens_in", "llm_tokens_out")
BUILD_COLUMNS = ("graph", "kind", "llm_requests", "llm_calls", "cache_hits", "tokens_in",
                 "tokens_out", "embeddings", "wall_s", "core_chunks", "parsed_first_try",
                 "failed_chunks", "entities", "relationships", "modules", "gates", "subchunks",
                 "keywords", "entities_per_chunk", "relationships_per_chunk", "empty_chunks",
                 "grounded_share", "chunks_per_min", "llm_tokens_per_chunk", "gold_triples",
                 "gold_in_scope", "entity_recall", "triple_recall", "relation_match")


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    """A fixed-width text table of result rows: the ``columns`` any row has, in that
    order (a column ending in ``@`` stands for every ``recall@k``)."""
    if not rows:
        return "(no rows)"
    present = list(dict.fromkeys(k for r in rows for k in r))  # a column any row has
    keys = [k for c in columns for k in present if k == c or (c.endswith("@") and
                                                              k.startswith(c))]
    cells = [[_cell(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)
