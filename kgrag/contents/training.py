"""The training artefacts: ARK's alignment scores and positives (``align``), its confusing
questions (``augment``) and each curriculum stage's model and loss curve (``stage``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

ALIGNMENT = "alignment.parquet"
AUGMENTED = "augmented.parquet"
LOSSES = "losses.parquet"
MODEL = "model"  # a sentence-transformers folder


def write_alignment(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema={"question_id": pl.String, "chunk_id": pl.String,
                               "forward": pl.Float64, "backward": pl.Float64,
                               "parameter": pl.Float64, "score": pl.Float64,
                               "positive": pl.Boolean}).write_parquet(folder / ALIGNMENT)


def read_alignment(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / ALIGNMENT)


def write_augmented(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema={"question_id": pl.String, "size": pl.String,
                               "question": pl.String}).write_parquet(folder / AUGMENTED)


def read_augmented(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / AUGMENTED)


def write_losses(folder: Path, curve: list[dict[str, Any]]) -> None:
    pl.DataFrame(curve, schema={"step": pl.Int64, "epoch": pl.Int64, "loss": pl.Float64,
                                "learning_rate": pl.Float64}).write_parquet(folder / LOSSES)


def model_dir(folder: Path) -> Path:
    return folder / MODEL


# ReG (``kgrag.training.reg``): the supervise step's weak labels and candidate pool, the
# refine step's positives. Triples are row numbers of the kg artefact's triples.
SUPERVISION = "supervision.parquet"
CANDIDATES = "candidates.parquet"
REFINED = "refined.parquet"


def write_supervision(folder: Path, rows: list[dict[str, Any]],
                      candidates: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema={"question_id": pl.String, "weak": pl.List(pl.Int64),
                               "answer": pl.String, "pool_before": pl.Int64,
                               "pool_after": pl.Int64}).write_parquet(folder / SUPERVISION)
    pl.DataFrame(candidates, schema={"question_id": pl.String, "candidate": pl.Int64,
                                     "source": pl.String, "path": pl.List(pl.Int64),
                                     "members": pl.List(pl.Int64)}
                 ).write_parquet(folder / CANDIDATES)


def read_supervision(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    return pl.read_parquet(folder / SUPERVISION), pl.read_parquet(folder / CANDIDATES)


def write_refined(folder: Path, rows: list[dict[str, Any]]) -> None:
    pl.DataFrame(rows, schema={"question_id": pl.String, "positives": pl.List(pl.Int64),
                               "selected": pl.List(pl.Int64), "outcome": pl.String}
                 ).write_parquet(folder / REFINED)


def read_refined(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / REFINED)
