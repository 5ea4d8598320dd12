"""The ``chunks`` artefact (step ``chunk``): the corpus cut into retrieval units.

One row per chunk: ``chunk_id``, ``doc_id``, ``title``, ``text``, its character span
``start`` / ``end`` in the document, the ``context`` a strategy hands the LLM
(``kgrag.retrieval.units.unit_text``) and that context's ``context_tokens``. KET-RAG's
sub-chunks (``kgrag.contents.bipartite``) are retrieval units with the same columns.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

CHUNKS_FILE = "chunks.parquet"
# What a strategy reads of every retrieval unit, chunk or sub-chunk (``Units.of``).
UNIT_COLUMNS = ["chunk_id", "doc_id", "context", "context_tokens"]


def write_chunks(folder: Path, chunks: pl.DataFrame) -> None:
    chunks.write_parquet(folder / CHUNKS_FILE)


def count_chunks(folder: Path) -> int | None:
    """How many chunks the artefact holds, without reading them; None without its table."""
    path = folder / CHUNKS_FILE
    return pl.scan_parquet(path).select(pl.len()).collect().item() if path.exists() else None


def read_chunks(folder: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return pl.read_parquet(folder / CHUNKS_FILE, columns=columns)
