"""The ``answer`` artefact: one row per answered question, the answer and its tokens; with
``answer.cite``, also one row per answer in ``citations.parquet``: the units it cites
(``cited_units``: a chunk's id, or ``part N`` for a part of the context that is not a
chunk; their ``cited_docs``, empty for such a part; ``cited_texts``, each part as the
LLM read it), every number it wrote (``numbers``, valid or not)
and how many units it was shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from kgrag.contents.columns import ColumnTypes

ANSWERS = "answers.parquet"
SCHEMA = {"question_id": pl.String, "answer": pl.String, "tokens_in": pl.Int64,
          "tokens_out": pl.Int64}


def write_answers(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema=SCHEMA).write_parquet(folder / ANSWERS)


def read_answers(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / ANSWERS)


CITATIONS = "citations.parquet"
CITATION_SCHEMA: ColumnTypes = {"question_id": pl.String, "cited_units": pl.List(pl.String),
                                "cited_docs": pl.List(pl.String), "cited_texts": pl.List(pl.String),
                                "numbers": pl.List(pl.Int64),
                                "shown": pl.Int64}


def write_citations(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema=CITATION_SCHEMA).write_parquet(folder / CITATIONS)


def read_citations(folder: Path) -> pl.DataFrame | None:
    """The citations of an answer step run with ``answer.cite``; None without them."""
    path = folder / CITATIONS
    return pl.read_parquet(path) if path.exists() else None
