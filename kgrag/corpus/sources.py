"""Where a chunk came from: the file, PDF page and section heading of a documents
folder's text (``Corpus.sections``), found from the chunk's character span."""

from __future__ import annotations

import bisect
from collections import Counter

import polars as pl

SOURCE_COLUMNS = ["file", "page", "page_end", "heading"]
# Bump when the rule that gives a chunk its file, pages or heading changes: a documents
# corpus's chunk step carries it, so its chunks are cut again.
SOURCES_VERSION = "2"


def with_sources(chunks: pl.DataFrame, sections: pl.DataFrame) -> pl.DataFrame:
    """``chunks`` (``doc_id``, ``start``, ``end``) with ``SOURCE_COLUMNS``: the section a
    chunk starts in gives its file and page, the one holding its last character its
    ``page_end``, and its heading is ``_heading``'s. A document's sections follow each
    other in its text, so the last one starting at or before a position holds it."""
    by_doc: dict[str, tuple[list[int], list[dict]]] = {}
    for row in sections.sort("doc_id", "start").iter_rows(named=True):
        starts, rows = by_doc.setdefault(row["doc_id"], ([], []))
        starts.append(row["start"])
        rows.append(row)

    firsts, lasts, headings = [], [], []
    for doc_id, start, end in zip(chunks["doc_id"], chunks["start"], chunks["end"]):
        starts, rows = by_doc[doc_id]
        first = max(bisect.bisect_right(starts, start) - 1, 0)
        last = max(bisect.bisect_right(starts, end - 1) - 1, 0)
        firsts.append(rows[first])
        lasts.append(rows[last])
        headings.append(_heading(rows[first:last + 1], start, end))
    return chunks.with_columns(
        pl.Series("file", [s["file"] for s in firsts], pl.String),
        pl.Series("page", [s["page"] for s in firsts], pl.Int64),
        pl.Series("page_end", [s["page"] for s in lasts], pl.Int64),
        pl.Series("heading", headings, pl.String))


def _heading(sections: list[dict], start: int, end: int) -> str | None:
    """The heading under which most of the chunk's characters lie, counting only those
    under a heading (the earliest heading on a tie): a chunk that begins with a page's
    preamble, before its first heading, and goes on under "2.7 Thread Safety" is about
    thread safety, not about nothing."""
    shares: Counter[str] = Counter()
    for section in sections:
        inside = min(end, section["end"]) - max(start, section["start"])
        if section["heading"] is not None and inside > 0:
            shares[section["heading"]] += inside
    return max(shares, key=shares.__getitem__, default=None)  # the first of equals


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
