"""Where a chunk came from: the file, PDF page and section heading of a documents
folder's text (``Corpus.sections``), found from the chunk's character span."""

from __future__ import annotations

import bisect

import polars as pl

SOURCE_COLUMNS = ["file", "page", "page_end", "heading"]


def with_sources(chunks: pl.DataFrame, sections: pl.DataFrame) -> pl.DataFrame:
    """``chunks`` (``doc_id``, ``start``, ``end``) with ``SOURCE_COLUMNS``: the section a
    chunk starts in gives its file, page and heading, the one holding its last character
    its ``page_end``. A document's sections follow each other in its text, so the last
    one starting at or before a position holds it."""
    by_doc: dict[str, tuple[list[int], list[dict]]] = {}
    for row in sections.sort("doc_id", "start").iter_rows(named=True):
        starts, rows = by_doc.setdefault(row["doc_id"], ([], []))
        starts.append(row["start"])
        rows.append(row)

    def section(doc_id: str, position: int) -> dict:
        starts, rows = by_doc[doc_id]
        return rows[max(bisect.bisect_right(starts, position) - 1, 0)]

    firsts = [section(d, s) for d, s in zip(chunks["doc_id"], chunks["start"])]
    lasts = [section(d, e - 1) for d, e in zip(chunks["doc_id"], chunks["end"])]
    return chunks.with_columns(
        pl.Series("file", [s["file"] for s in firsts], pl.String),
        pl.Series("page", [s["page"] for s in firsts], pl.Int64),
        pl.Series("page_end", [s["page"] for s in lasts], pl.Int64),
        pl.Series("heading", [s["heading"] for s in firsts], pl.String))


def describe(file: str | None, page: int | None, page_end: int | None,
             heading: str | None) -> str:
    """Where a chunk came from, in words: ``guide.pdf, pp. 2-3, § Rivers``."""
    parts = [file] if file else []
    if page is not None:
        parts.append(f"p. {page}" if page_end in (None, page) else f"pp. {page}-{page_end}")
    if heading:
        parts.append(f"§ {heading}")
    return ", ".join(parts)


def chunk_sources(chunks: pl.DataFrame) -> dict[str, str]:
    """Chunk id → ``describe`` of where it came from, for a chunks table with
    ``SOURCE_COLUMNS`` (a documents folder's); empty for any other."""
    if not set(SOURCE_COLUMNS) <= set(chunks.columns):
        return {}
    return {row["chunk_id"]: describe(row["file"], row["page"], row["page_end"], row["heading"])
            for row in chunks.select("chunk_id", *SOURCE_COLUMNS).iter_rows(named=True)}
