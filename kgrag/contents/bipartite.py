"""The ``bipartite`` artefact (KET-RAG's keyword–sub-chunk graph), what Keyword-RAG reads.

``subchunks.parquet`` holds the sub-chunks as retrieval units (the columns of
``kgrag.contents.chunks``, ``chunk_id`` holding the sub-chunk id, plus
``parent_chunk_id``); ``keywords.parquet`` each keyword's ``n_subchunks``;
``edges.parquet`` the graph (``keyword``, ``subchunk_id``). Keyword vectors (mean
sentence embeddings) and sub-chunk vectors are the vector tables ``keywords`` and
``subchunks``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from kgrag.store.vectors import VectorTable

SUBCHUNKS_FILE = "subchunks.parquet"
KEYWORDS_FILE = "keywords.parquet"
EDGES_FILE = "edges.parquet"
KEYWORD_TABLE = "keywords"
SUBCHUNK_TABLE = "subchunks"


def write_bipartite(folder: Path, subchunks: pl.DataFrame, keywords: pl.DataFrame,
                    edges: pl.DataFrame, subchunk_vectors: np.ndarray) -> None:
    """``keywords`` has ``keyword``, ``n_subchunks`` and the keyword ``vector``."""
    subchunks.write_parquet(folder / SUBCHUNKS_FILE)
    keywords.select("keyword", "n_subchunks").write_parquet(folder / KEYWORDS_FILE)
    edges.write_parquet(folder / EDGES_FILE)
    VectorTable.create(folder, KEYWORD_TABLE, keywords["keyword"].to_list(),
                       keywords["vector"].to_numpy())
    VectorTable.create(folder, SUBCHUNK_TABLE, subchunks["chunk_id"].to_list(),
                       subchunk_vectors)


def read_subchunks(folder: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return pl.read_parquet(folder / SUBCHUNKS_FILE, columns=columns)


def read_keywords(folder: Path) -> pl.DataFrame:
    """Each keyword and its number of sub-chunks (``keyword``, ``n_subchunks``)."""
    return pl.read_parquet(folder / KEYWORDS_FILE, columns=["keyword", "n_subchunks"])


def keyword_degrees(folder: Path) -> list[int]:
    """Each keyword's number of sub-chunks, its degree in the bipartite graph."""
    return pl.read_parquet(folder / KEYWORDS_FILE, columns=["n_subchunks"])["n_subchunks"].to_list()


def read_edges(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / EDGES_FILE, columns=["keyword", "subchunk_id"])


def open_keyword_vectors(folder: Path) -> VectorTable:
    return VectorTable.open(folder, KEYWORD_TABLE)


def open_subchunk_vectors(folder: Path) -> VectorTable:
    return VectorTable.open(folder, SUBCHUNK_TABLE)
