"""The ``dense`` artefact (step ``dense_index``): one vector per chunk, by ``chunk_id``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kgrag.store.vectors import VectorTable

DENSE_TABLE = "chunks"


def write_dense(folder: Path, chunk_ids: list[str], vectors: np.ndarray,
                ann: dict[str, Any] | None = None) -> VectorTable:
    """The table, with an ANN index when ``ann`` asks for one at this size."""
    return VectorTable.create(folder, DENSE_TABLE, chunk_ids, vectors, ann)


def grow_dense(folder: Path, earlier: Path, chunk_ids: list[str], vectors: np.ndarray,
               ann: dict[str, Any] | None) -> VectorTable | None:
    """``write_dense``'s table made from ``earlier``'s (a ``dense`` artefact of the same
    settings), or None where it cannot be (``VectorTable.grow``)."""
    return VectorTable.grow(folder, DENSE_TABLE, earlier, chunk_ids, vectors, ann)


def open_dense(folder: Path) -> VectorTable:
    return VectorTable.open(folder, DENSE_TABLE)
