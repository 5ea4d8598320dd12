"""The ``summaries`` artefact (HugRAG's step ``summarise``): one summary per module.

``summaries.parquet`` has ``module_id``, ``title``, ``summary``, the ``text`` HugRAG
shows (``title: summary``), whether it is a ``fallback`` and its ``tokens``; the
vector table ``modules`` embeds the texts by ``module_id`` (absent when there are no
modules).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from kgrag.store.vectors import VectorTable

SUMMARIES_FILE = "summaries.parquet"
MODULE_TABLE = "modules"


def write_summaries(folder: Path, summaries: pl.DataFrame, vectors: np.ndarray | None) -> None:
    summaries.write_parquet(folder / SUMMARIES_FILE)
    if vectors is not None:
        VectorTable.create(folder, MODULE_TABLE, summaries["module_id"].to_list(), vectors)


def read_summaries(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / SUMMARIES_FILE)


def open_module_vectors(folder: Path) -> VectorTable:
    return VectorTable.open(folder, MODULE_TABLE)
