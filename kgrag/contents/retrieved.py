"""The ``retrieve`` artefact: one row per question, what one strategy retrieved.

``unit_ids`` / ``doc_ids`` in rank order, the ``context`` the LLM reads and its
``context_tokens``, the retrieval's time and the LLM calls it made (``llm_*``), and
the strategy's per-question ``trace`` as JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from kgrag.contents.columns import ColumnTypes

RETRIEVED = "retrieved.parquet"
SCHEMA: ColumnTypes = {"question_id": pl.String, "unit_ids": pl.List(pl.String),
                       "doc_ids": pl.List(pl.String), "context": pl.String,
                       "context_tokens": pl.Int64, "retrieval_ms": pl.Float64,
                       "llm_ms": pl.Float64, "llm_calls": pl.Int64, "llm_tokens_in": pl.Int64,
                       "llm_tokens_out": pl.Int64, "trace": pl.String}


def write_retrieved(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema=SCHEMA).write_parquet(folder / RETRIEVED)


def read_retrieved(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / RETRIEVED)
