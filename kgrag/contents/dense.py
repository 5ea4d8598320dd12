"""The ``dense`` artefact (step ``dense_index``): one vector per chunk, by ``chunk_id``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kgrag.store.vectors import VectorTable

DENSE_TABLE = "chunks"


def write_dense(folder: Path, chunk_ids: list[str], vectors: np.ndarray,
                ann: dict[str, Any] | None = None, earlier: Path | None = None
                ) -> VectorTable:
    """The table, with an ANN index when ``ann`` asks for one at this size, grown from
    ``earlier``'s (a ``dense`` artefact of the same settings) where it can be
    (``VectorTable.create``)."""
    return VectorTable.create(folder, DENSE_TABLE, chunk_ids, vectors, ann, earlier)


def open_dense(folder: Path) -> VectorTable:
    return VectorTable.open(folder, DENSE_TABLE)
