"""The ``chunks`` artefact (step ``chunk``): the corpus cut into retrieval units.

One row per chunk: ``chunk_id``, ``doc_id``, ``title``, ``text``, its character span
``start`` / ``end`` in the document, the ``context`` a strategy hands the LLM
(``kgrag.retrieval.units.unit_text``) and that context's ``context_tokens``. KET-RAG's
sub-chunks (``kgrag.contents.bipartite``) are retrieval units with the same columns.

``document_digests.parquet`` holds a digest of each document the chunks were cut from (its row
and its sections): the next build over a changed corpus takes the chunks of the
documents whose digest is unchanged from here (``read_kept``) and cuts only the others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

CHUNKS_FILE = "chunks.parquet"
DIGESTS_FILE = "document_digests.parquet"
# What a strategy reads of every retrieval unit, chunk or sub-chunk (``Units.of``).
UNIT_COLUMNS = ["chunk_id", "doc_id", "context", "context_tokens"]


def write_chunks(folder: Path, chunks: pl.DataFrame, digests: pl.DataFrame | None = None
                 ) -> None:
    chunks.write_parquet(folder / CHUNKS_FILE)
    if digests is not None:
        digests.write_parquet(folder / DIGESTS_FILE)


def document_digests(documents: pl.DataFrame, sections: pl.DataFrame | None) -> pl.DataFrame:
    """``doc_id`` and ``digest``: the sha256 of each document's row and its sections'
    rows, everything its chunks are cut from."""
    spans: dict[str, list[tuple[Any, ...]]] = {}
    if sections is not None:
        of = sections.columns.index("doc_id")
        for row in sections.iter_rows():
            spans.setdefault(row[of], []).append(row)
    at = documents.columns.index("doc_id")
    return pl.DataFrame({
        "doc_id": documents["doc_id"],
        "digest": [hashlib.sha256(json.dumps([row, spans.get(row[at], [])], default=str)
                                  .encode()).hexdigest() for row in documents.iter_rows()]},
        schema={"doc_id": pl.String, "digest": pl.String})


def read_kept(folder: Path, digests: pl.DataFrame) -> pl.DataFrame | None:
    """The chunks of ``folder``'s artefact cut from documents whose digest is among
    ``digests`` (unchanged since), in its order; None where it keeps no digests."""
    if not (folder / DIGESTS_FILE).exists():
        return None
    same = pl.read_parquet(folder / DIGESTS_FILE).join(digests, on=["doc_id", "digest"])
    return read_chunks(folder).filter(pl.col("doc_id").is_in(same["doc_id"].implode()))


def count_chunks(folder: Path) -> int | None:
    """How many chunks the artefact holds, without reading them; None without its table."""
    path = folder / CHUNKS_FILE
    return pl.scan_parquet(path).select(pl.len()).collect().item() if path.exists() else None


def read_chunks(folder: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return pl.read_parquet(folder / CHUNKS_FILE, columns=columns)


def chunk_parts(folder: Path, rows: int) -> Iterator[tuple[list[str], list[str]]]:
    """Every chunk's id and ``context``, in the artefact's order, ``rows`` chunks at a
    time: the reader decodes one row group of the file at a time, not the whole column."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(folder / CHUNKS_FILE) as table:
        for batch in table.iter_batches(rows, columns=["chunk_id", "context"]):
            yield batch.column("chunk_id").to_pylist(), batch.column("context").to_pylist()
