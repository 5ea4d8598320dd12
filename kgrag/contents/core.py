"""The ``core`` artefact (KET-RAG's step ``core``): the KNN chunk graph and the core chunks.

``core.parquet`` has one row per chunk (``chunk_id``, ``pagerank``, ``core``: chosen
for extraction); ``knn.parquet`` one row per directed edge of the symmetric KNN graph
(``source``, ``target``: chunk ids), which strategy ``knng`` walks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

CORE = "core.parquet"
KNN_FILE = "knn.parquet"


def write_core(folder: Path, chunk_ids: pl.Series, pagerank: np.ndarray, core: np.ndarray,
               knn_edges: tuple[np.ndarray, np.ndarray]) -> None:
    """The chunks' PageRank and core flags, and the KNN graph's edges as row indices
    into ``chunk_ids``."""
    pl.DataFrame({"chunk_id": chunk_ids, "pagerank": pagerank, "core": core}
                 ).write_parquet(folder / CORE)
    rows, cols = knn_edges
    pl.DataFrame({"source": chunk_ids.gather(rows), "target": chunk_ids.gather(cols)}
                 ).write_parquet(folder / KNN_FILE)


def read_core_ids(folder: Path) -> pl.Series:
    """The ids of the core chunks."""
    return pl.read_parquet(folder / CORE).filter(pl.col("core"))["chunk_id"]


def read_knn(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / KNN_FILE, columns=["source", "target"])
