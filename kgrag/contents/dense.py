"""The ``dense`` artefact (step ``dense_index``): one vector per chunk, by ``chunk_id``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgrag.store.vectors import VectorTable

DENSE_TABLE = "chunks"


def write_dense(folder: Path, chunk_ids: list[str], vectors: np.ndarray) -> None:
    VectorTable.create(folder, DENSE_TABLE, chunk_ids, vectors)


def open_dense(folder: Path) -> VectorTable:
    return VectorTable.open(folder, DENSE_TABLE)
