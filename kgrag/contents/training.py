"""The training artefacts: ARK's alignment scores and positives (``align``), its confusing
questions (``augment``) and each curriculum stage's model and loss curve (``stage``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

ALIGNMENT = "alignment.parquet"
AUGMENTED = "augmented.parquet"
LOSSES = "losses.parquet"
MODEL = "model"  # a sentence-transformers folder


def write_alignment(folder: Path, rows: list[dict]) -> None:
    pl.DataFrame(rows, schema={"question_id": pl.String, "chunk_id": pl.String,
                               "forward": pl.Float64, "backward": pl.Float64,
                               "parameter": pl.Float64, "score": pl.Float64,
                               "positive": pl.Boolean}).write_parquet(folder / ALIGNMENT)


def read_alignment(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / ALIGNMENT)


def write_augmented(folder: Path, rows: list[dict]) -> None:
    pl.DataFrame(rows, schema={"question_id": pl.String, "size": pl.String,
                               "question": pl.String}).write_parquet(folder / AUGMENTED)


def read_augmented(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / AUGMENTED)


def write_losses(folder: Path, curve: list[dict]) -> None:
    pl.DataFrame(curve, schema={"step": pl.Int64, "epoch": pl.Int64, "loss": pl.Float64,
                                "learning_rate": pl.Float64}).write_parquet(folder / LOSSES)


def read_losses(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / LOSSES)


def model_dir(folder: Path) -> Path:
    return folder / MODEL
