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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.contents.columns import parquet_parts
from kgrag.errors import KgragError

CHUNKS_FILE = "chunks.parquet"
DIGESTS_FILE = "document_digests.parquet"
# What a strategy reads of every retrieval unit, chunk or sub-chunk (``Units.of``).
UNIT_COLUMNS = ["chunk_id", "doc_id", "context", "context_tokens"]


# Chunks written to the file at a time (a row group): a writer holds about 100 MB of them.
ROW_GROUP = 32_768


def write_chunks(folder: Path, parts: Iterable[pl.DataFrame],
                 digests: pl.DataFrame | None = None) -> int:
    """The chunk table of ``parts`` (frames of the same columns, in order), written as
    they come, a row group of ``ROW_GROUP`` chunks at a time; how many were written."""
    import pyarrow.parquet as pq

    writer, written = None, 0
    try:
        for group in _row_groups(parts):
            table = group.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(folder / CHUNKS_FILE, table.schema, compression="zstd")
            writer.write_table(table)
            written += group.height
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise KgragError(f"no chunks to write in {folder}")
    if digests is not None:
        digests.write_parquet(folder / DIGESTS_FILE)
    return written


def _row_groups(parts: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """``parts`` joined into frames of at least ``ROW_GROUP`` rows, then what is left
    (every part's columns, so an empty table keeps them)."""
    held: list[pl.DataFrame] = []
    for part in parts:
        held.append(part)
        if sum(frame.height for frame in held) >= ROW_GROUP:
            yield pl.concat(held)
            held = []
    if held:
        yield pl.concat(held)


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


def chunk_columns(folder: Path) -> list[str]:
    """The columns of the artefact's chunk table, from its schema alone."""
    return list(pl.read_parquet_schema(folder / CHUNKS_FILE))


def chunk_frames(folder: Path, columns: list[str], rows: int) -> Iterator[pl.DataFrame]:
    """The artefact's chunks in its order, ``rows`` at a time, those ``columns`` only
    (``parquet_parts``)."""
    return parquet_parts(folder / CHUNKS_FILE, columns, rows)
