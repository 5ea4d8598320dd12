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
