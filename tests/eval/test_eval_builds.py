"""Graph build rows: costs summed over a build's steps, unknown when a step's record is."""

from __future__ import annotations

import polars as pl

from kgrag.eval.builds import build_row, extraction_figures
from kgrag.eval.report import BUILD_COLUMNS, format_table
from kgrag.graphs.elements import Extraction, ExtractionCounts, counts_frame


def record(calls: int, hits: int, wall_s: float, **notes) -> dict:
    return {"wall_s": wall_s, "llm": {"calls": calls, "cache_hits": hits, "tokens_in": 10 * calls,
                                      "tokens_out": 2 * calls},
            "embed": {"calls": 3, "cache_hits": 1}, "notes": notes}


def test_a_build_row_sums_its_steps_and_carries_their_figures() -> None:
    row = build_row("skel@beta=0.2", "skeleton", [
        record(0, 0, 1.25, core_chunks=5, chunks=21),
        record(4, 2, 30.0, core_chunks=5, parsed_first_try=0.8, failed_chunks=["c1"]),
        record(0, 0, 0.5, entities=9, relationships=3),
    ])
    assert row == {"graph": "skel@beta=0.2", "kind": "skeleton", "llm_requests": 6,
                   "llm_calls": 4, "cache_hits": 2, "tokens_in": 40, "tokens_out": 8,
                   "embeddings": 12, "wall_s": 31.8, "core_chunks": 5,
                   "parsed_first_try": 0.8, "failed_chunks": 1, "entities": 9,
                   "relationships": 3}


def test_a_build_that_started_from_an_earlier_one_says_so() -> None:
    """A rerun after the corpus changed paid only for what changed: its row names the
    earlier artefacts, so that its cost is not read as a cold build's."""
    row = build_row("kg", "entities", [record(0, 0, 3.2, reused_from="extract.kg-0123",
                                              entities=9)])
    assert row["started_from"] == "extract.kg-0123" and row["wall_s"] == 3.2
    assert "started_from" not in build_row("kg", "entities", [record(0, 0, 90.0)])


def test_a_step_without_a_record_makes_the_costs_unknown_not_zero() -> None:
    row = build_row("kw", "bipartite", [None])
    assert row["llm_calls"] is None and row["wall_s"] is None
    table = format_table([row], BUILD_COLUMNS)
    assert table.splitlines()[0].split()[:3] == ["graph", "kind", "llm_requests"]
    assert table.splitlines()[2].split()[2] == "-"


def test_extraction_figures_per_chunk_grounding_and_speed() -> None:
    counts = counts_frame([
        Extraction("c1", (), (), 1, ExtractionCounts(
            entities_raw=5, entities_empty=1, entities_duplicate=1, entities_implied=1,
            entities_ungrounded=1, relationships_raw=3, relationships_invalid=1,
            relationships_ungrounded=1)),
        Extraction("c2", (), (), 1),  # nothing found: an empty chunk, not a failure
        Extraction("c3", (), (), 3, error="never parsed"),
    ]).with_columns(entities=pl.Series([3, 0, 0]), relationships=pl.Series([1, 0, 0]))
    figures = extraction_figures(counts, wall_s=30.0, llm_tokens=600)
    assert figures == {"entities_per_chunk": 1.0, "relationships_per_chunk": 0.33,
                       "empty_chunks": 1, "grounded_share": round(1 - 2 / 6, 4),
                       "chunks_per_min": 6.0, "llm_tokens_per_chunk": 200.0}
    unknown = extraction_figures(counts, wall_s=None, llm_tokens=None)
    assert unknown["chunks_per_min"] is None and unknown["llm_tokens_per_chunk"] is None
