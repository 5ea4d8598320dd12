"""Result rows for graph builds: what each one cost and what it produced.

A build is several steps (a ``skeleton`` is core → extract → skeleton); each step's
artefact keeps the record of the run that built it (``build.json``), so the cost of
a build is reported even when a later run reuses it. ``llm_requests`` counts every
request the build made, ``llm_calls`` those the model answered and ``cache_hits``
those the shared call cache did (an extraction another build had already paid for).
A step that started from its earlier artefact (a rerun after the corpus changed) paid
only for what changed: ``started_from`` names those artefacts, so that its cost is not
read as a cold build's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

# Step notes carried into a build's row: extraction and graph sizes. ``entities`` and
# ``relationships`` are the extraction merged by normalised name (before HugRAG's
# canonicalisation, whose counts are in the manifest).
FIGURES = ("core_chunks", "parsed_first_try", "entities", "relationships", "modules", "gates",
           "subchunks", "keywords")


def build_row(graph: str, kind: str, records: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Sum the cost of one build's steps; ``None`` for a step built before costs were
    kept with artefacts makes the cost columns unknown (``None``), not zero."""
    row: dict[str, Any] = {"graph": graph, "kind": kind}
    known = [r for r in records if r is not None]
    complete = len(known) == len(records)

    def total(get: Any) -> Any:
        return sum(get(r) for r in known) if complete else None

    row.update(
        llm_requests=total(lambda r: r["llm"]["calls"] + r["llm"]["cache_hits"]),
        llm_calls=total(lambda r: r["llm"]["calls"]),
        cache_hits=total(lambda r: r["llm"]["cache_hits"]),
        tokens_in=total(lambda r: r["llm"]["tokens_in"]),
        tokens_out=total(lambda r: r["llm"]["tokens_out"]),
        embeddings=total(lambda r: r["embed"]["calls"] + r["embed"]["cache_hits"]),
        wall_s=total(lambda r: r["wall_s"]),
    )
    if complete:
        row["wall_s"] = round(row["wall_s"], 1)
    started = []
    for record in known:
        notes = record.get("notes", {})
        row.update({key: notes[key] for key in FIGURES if key in notes})
        if "failed_chunks" in notes:
            row["failed_chunks"] = len(notes["failed_chunks"])
        if "reused_from" in notes:
            started.append(notes["reused_from"])
    if started:  # its cost is the rerun's, from these earlier artefacts, not a cold build's
        row["started_from"] = ", ".join(started)
    return row


def extraction_figures(counts: pl.DataFrame, wall_s: float | None,
                       llm_tokens: int | None) -> dict[str, Any]:
    """What one extraction made per chunk, and how fast, from its per-chunk counts
    (``counts_frame``), its step's wall seconds and its LLM tokens (in + out).

    ``grounded_share`` is the share of distinct proposed items (entities and
    relationships, after normalising and deduplicating, before grounding) whose names
    occur in the chunk; ``empty_chunks`` are chunks extracted without error that
    yielded no entity (a result, not a failure). Timing and token figures are None
    when the step's record is unknown.
    """
    ok = counts.filter(pl.col("error").is_null())
    n = counts.height
    proposed = int((ok["entities_raw"] - ok["entities_empty"] - ok["entities_duplicate"]
                + ok["entities_implied"] + ok["relationships_raw"]
                - ok["relationships_invalid"] - ok["relationships_duplicate"]).sum())
    ungrounded = int((ok["entities_ungrounded"] + ok["relationships_ungrounded"]).sum())
    return {
        "entities_per_chunk": round(float(counts["entities"].sum()) / n, 2) if n else None,
        "relationships_per_chunk": (round(float(counts["relationships"].sum()) / n, 2)
                                    if n else None),
        "empty_chunks": ok.filter(pl.col("entities") == 0).height,
        "grounded_share": round(1 - ungrounded / proposed, 4) if proposed else None,
        "chunks_per_min": round(60 * n / wall_s, 1) if wall_s and n else None,
        "llm_tokens_per_chunk": (round(llm_tokens / n, 1) if llm_tokens is not None and n
                                 else None),
    }


# Step notes carried into a training entry's row (``training_row``).
TRAINING_FIGURES = {"align": ("questions", "scored_units", "skipped_no_answer"),
                    "augment": ("augmented", "skipped_no_entity", "skipped_small_graph",
                                "skipped_unparsed"),
                    "subq": ("closed_book_known", "skipped_no_documents", "subquery_fallbacks",
                             "heldback_samples", "table4"),
                    "supervise": ("questions", "skipped_no_path", "pool_before_mean",
                                  "pool_before_max", "pool_after_mean", "pool_after_max"),
                    "refine": ("refined", "fallback_unparsed", "weak_unrefined"),
                    "train": ("positives", "best_epoch", "last_loss"),
                    "graph_llm": ("samples", "heldback_plans", "planner_accuracy_trained",
                                  "planner_accuracy_few_shot", "train_wall_s", "train_peak_mb",
                                  "epoch_losses")}


def training_row(entry: str, method: str, steps: Sequence[tuple[str, dict[str, Any] | None]]
                 ) -> dict[str, Any]:
    """A training entry's cost (its steps summed, as ``build_row``), its skips, and each
    curriculum stage's wall seconds, peak memory, examples and last loss. ``steps`` are
    (step name, build record) in plan order."""
    row = build_row(entry, method, [record for _, record in steps])
    row["graph"] = row.pop("graph")  # the entry's name, in the build rows' column
    for name, record in steps:
        if record is None:
            continue
        artefact = name.split(".", 1)[0]
        notes = record.get("notes", {})
        row.update({key: notes[key] for key in TRAINING_FIGURES.get(artefact, ())
                    if key in notes})
        if artefact == "train":  # ReG's retriever training: its cost, as the runner recorded it
            row |= {"train_wall_s": round(record["wall_s"], 1),
                    "train_peak_mb": record["peak_rss_mb"]}
        if artefact.startswith("stage"):
            row |= {f"{artefact}_s": round(record["wall_s"], 1),
                    f"{artefact}_peak_mb": record["peak_rss_mb"],
                    f"{artefact}_examples": notes.get("examples"),
                    f"{artefact}_loss": notes.get("last_loss")}
    return row
