"""The ``answer`` artefact: one row per answered question, the answer and its tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

ANSWERS = "answers.parquet"
SCHEMA = {"question_id": pl.String, "answer": pl.String, "tokens_in": pl.Int64,
          "tokens_out": pl.Int64}


def write_answers(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema=SCHEMA).write_parquet(folder / ANSWERS)


def read_answers(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / ANSWERS)
