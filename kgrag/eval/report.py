"""Results rows (one per query strategy) and their printed table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from kgrag.eval.metrics import percentile
from kgrag.eval.registry import EvidenceSpans, StrategyRun, score_strategy


def strategy_row(name: str, method: str, metrics: Sequence[str], questions: pl.DataFrame,
                 retrieved: pl.DataFrame, answers: pl.DataFrame | None,
                 spans: EvidenceSpans | None = None,
                 citations: pl.DataFrame | None = None) -> dict[str, Any]:
    """Mean metrics of one strategy over the questions it retrieved for.

    Answer metrics (EM, F1) average over the answered questions only; LLM
    figures are the cost of the method's requests, whether or not the cache
    served them (the manifest records real model calls), retrieval's own calls
    (HugRAG's causal filter) included. ``spans`` is needed
    only for ``context_recall``, which averages over the questions that have
    gold sentences; ``citations`` (``answer.cite``) for the citation metrics.
    """
    table = questions.join(retrieved, on="question_id", how="inner")
    golds = table["answers"].to_list()
    row: dict[str, Any] = {"strategy": name, "method": method, "n_retrieved": table.height}
    answer_of = {} if answers is None else dict(zip(answers["question_id"], answers["answer"]))
    answered = [(answer_of[q], g) for q, g in zip(table["question_id"], golds) if q in answer_of]
    row["n_answered"] = len(answered)
    cited = cited_texts = None
    if citations is not None:
        docs_of = dict(zip(citations["question_id"], citations["cited_docs"].to_list()))
        cited = [(docs_of[q], s) for q, s in zip(table["question_id"],
                                                 table["supporting_doc_ids"].to_list())
                 if q in docs_of]
        if "cited_texts" in citations.columns:
            texts_of = dict(zip(citations["question_id"], citations["cited_texts"].to_list()))
            cited_texts = [(texts_of[q], g) for q, g in zip(table["question_id"], golds)
                           if q in texts_of]
    run = StrategyRun(table, answered, spans, cited, cited_texts)
    row.update({metric: score_strategy(metric, run) for metric in metrics})
    latencies = table["retrieval_ms"].to_list()
    row.update(
        retrieval_ms_p50=round(percentile(latencies, 50), 3),
        retrieval_ms_p95=round(percentile(latencies, 95), 3),
        retrieval_llm_ms_p50=round(percentile(table["llm_ms"].to_list(), 50), 3),
        context_tokens_mean=round(float(table.select(pl.col("context_tokens").mean()).item()
                                        or 0.0), 1),
        llm_calls=int(table["llm_calls"].sum()) + (0 if answers is None else answers.height),
        llm_tokens_in=int(table["llm_tokens_in"].sum())
        + (0 if answers is None else int(answers["tokens_in"].sum())),
        llm_tokens_out=int(table["llm_tokens_out"].sum())
        + (0 if answers is None else int(answers["tokens_out"].sum())),
    )
    row["llm_calls_per_query"] = round(row["llm_calls"] / max(1, table.height), 3)
    return row


COLUMNS = ("strategy", "em", "f1", "cited", "citation_precision", "citation_precision_answer",
           "citation_recall", "coverage", "recall@", "iterations", "context_recall", "reachability",
           "reachability_no_gates", "gold_coverage", "gold_coverage_no_gates", "min_hops",
           "min_hops_no_gates", "context_tokens_mean", "retrieval_ms_p50", "retrieval_ms_p95",
           "retrieval_llm_ms_p50", "llm_calls_per_query", "llm_tokens_in", "llm_tokens_out")
BUILD_COLUMNS = ("graph", "kind", "llm_requests", "llm_calls", "cache_hits", "tokens_in",
                 "tokens_out", "embeddings", "wall_s", "started_from", "core_chunks",
                 "parsed_first_try", "failed_chunks", "entities", "relationships", "modules",
                 "gates", "subchunks", "keywords", "entities_per_chunk",
                 "relationships_per_chunk", "empty_chunks",
                 "grounded_share", "chunks_per_min", "llm_tokens_per_chunk", "gold_triples",
                 "gold_in_scope", "entity_recall", "triple_recall", "relation_match")

TRAINING_COLUMNS = ("graph", "kind", "llm_requests", "llm_calls", "cache_hits", "tokens_in",
                    "tokens_out", "embeddings", "wall_s", "questions", "scored_units",
                    "skipped_no_answer", "entities", "relationships", "augmented",
                    "skipped_no_entity", "skipped_small_graph", "skipped_unparsed",
                    "skipped_no_path", "pool_before_mean", "pool_before_max", "pool_after_mean",
                    "pool_after_max", "refined", "fallback_unparsed", "weak_unrefined",
                    "positives", "best_epoch", "last_loss",
                    "closed_book_known", "samples", "heldback_plans", "planner_accuracy_trained",
                    "planner_accuracy_few_shot", "train_wall_s", "train_peak_mb",
                    *(f"stage{n}_{what}" for n in (1, 2, 3)
                      for what in ("s", "peak_mb", "examples", "loss")))


def table_columns(rows: Sequence[dict[str, Any]], columns: Sequence[str] = COLUMNS
                  ) -> list[str]:
    """The ``columns`` any of the rows has, in that order (a column ending in ``@``
    stands for every ``recall@k``): what a table of them shows."""
    present = list(dict.fromkeys(k for r in rows for k in r))  # a column any row has
    return [k for c in columns for k in present if k == c or (c.endswith("@") and
                                                              k.startswith(c))]


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    """A fixed-width text table of result rows (``table_columns``)."""
    if not rows:
        return "(no rows)"
    keys = table_columns(rows, columns)
    cells = [[format_cell(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def format_cell(value: Any) -> str:
    """A table cell: ``-`` for a missing value, 3 decimals below 10, 1 from there."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)
