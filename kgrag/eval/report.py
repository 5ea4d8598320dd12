"""Results rows (one per query strategy) and their printed table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from kgrag.eval.metrics import covers, exact_match, f1_score, percentile, recall_at_k


def strategy_row(name: str, method: str, metrics: Sequence[str], questions: pl.DataFrame,
                 retrieved: pl.DataFrame, answers: pl.DataFrame | None) -> dict[str, Any]:
    """Mean metrics of one strategy over the questions it retrieved for.

    Answer metrics (EM, F1) average over the answered questions only; LLM
    figures are the cost of the method's requests, whether or not the cache
    served them (the manifest records real model calls).
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
        else:
            k = int(metric.split("@", 1)[1])
            values = [recall_at_k(d, s, k) for d, s in zip(table["doc_ids"].to_list(),
                                                           table["supporting_doc_ids"].to_list())]
            row[metric] = _mean([v for v in values if v is not None])
    latencies = table["retrieval_ms"].to_list()
    row.update(
        retrieval_ms_p50=round(percentile(latencies, 50), 3),
        retrieval_ms_p95=round(percentile(latencies, 95), 3),
        context_tokens_mean=round(float(table["context_tokens"].mean() or 0.0), 1),
        llm_calls=0 if answers is None else answers.height,
        llm_tokens_in=0 if answers is None else int(answers["tokens_in"].sum()),
        llm_tokens_out=0 if answers is None else int(answers["tokens_out"].sum()),
    )
    return row


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


COLUMNS = ("strategy", "em", "f1", "coverage", "recall@", "context_tokens_mean",
           "retrieval_ms_p50", "retrieval_ms_p95", "llm_calls", "llm_tokens_in", "llm_tokens_out")


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A fixed-width text table of the result rows."""
    if not rows:
        return "(no query strategies)"
    keys = [k for c in COLUMNS for k in rows[0] if k == c or (c.endswith("@") and
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
