"""The report's corpus section: the documents, the chunks with their text on a click, and
a documents folder's files that gave no text, with why.

A corpus may hold a million chunks, so each list shows its first ``SHOWN`` rows and says
how many it leaves out: the page stays a few hundred kilobytes whatever the corpus.
"""

from __future__ import annotations

from html import escape

import polars as pl

from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_documents, read_sections, read_sources
from kgrag.corpus.sources import chunk_sources
from kgrag.report.run_folder import CORPUS, RunFolder
from kgrag.report.units import CHUNKS, unit_details

SHOWN = 200  # rows of each list at most
READ = ("converted", "cached")  # a source file's status when it gave text


def corpus_section(run: RunFolder) -> str:
    folder = run.artefact(CORPUS)
    documents = read_documents(folder).select(
        "doc_id", "title", characters=pl.col("text").str.len_chars())
    chunks = read_chunks(run.artefact(CHUNKS)) if CHUNKS in run.artefacts else None
    if chunks is not None:
        counts = chunks.group_by("doc_id").agg(chunks=pl.len())
        documents = documents.join(counts, on="doc_id", how="left", maintain_order="left")
    sections = read_sections(folder)
    if sections is not None:  # a documents folder: the file each document was read from
        files = sections.group_by("doc_id", maintain_order=True).agg(pl.col("file").first())
        documents = documents.join(files, on="doc_id", how="left", maintain_order="left")
    parts = [f"<h3>Documents ({documents.height})</h3>",
             _rows(documents.select("title", *(["file"] if sections is not None else []),
                                    "doc_id", "characters",
                                    *(["chunks"] if chunks is not None else []))),
             _left_out(documents.height, "documents")]
    parts.append(_chunks(chunks))
    sources = read_sources(folder)
    if sources is not None:
        parts.append(_files(sources))
    return "".join(parts)


def _chunks(chunks: pl.DataFrame | None) -> str:
    if chunks is None:
        return ('<h3>Chunks</h3><p class="muted">this run cut no chunks: no graph build, '
                "strategy or training of its spec reads them</p>")
    shown = chunks.head(SHOWN)
    where = chunk_sources(shown)
    items = "".join(
        "<li>" + unit_details(
            f"<code>{escape(row['chunk_id'])}</code> {escape(row['title'])}"
            + (f' <span class="where">{escape(where[row["chunk_id"]])}</span>'
               if where.get(row["chunk_id"]) else "")
            + f' <span class="muted">{row["context_tokens"]} tokens</span>', row["context"])
        + "</li>" for row in shown.iter_rows(named=True))
    return (f'<h3>Chunks ({chunks.height})</h3><p class="muted">Click a chunk for its text, '
            "as a strategy hands it to the LLM.</p>"
            f'<ol class="chunks">{items}</ol>{_left_out(chunks.height, "chunks")}')


def _files(sources: pl.DataFrame) -> str:
    """What became of each file of a documents folder: how many gave text, and each one
    that did not, with why."""
    skipped = sources.filter(~pl.col("status").is_in(READ))
    read = sources.height - skipped.height
    said = (f'<p class="muted">{sources.height} files: {read} gave text, {skipped.height} '
            "skipped.</p>")
    if skipped.is_empty():
        return f"<h3>Files skipped (0)</h3>{said}"
    return (f"<h3>Files skipped ({skipped.height})</h3>{said}"
            + _rows(skipped.select("file", "status", "detail"))
            + _left_out(skipped.height, "skipped files"))


def _rows(table: pl.DataFrame) -> str:
    """The first ``SHOWN`` rows of ``table`` as an HTML table that scrolls sideways
    when it is wider than the page."""
    head = "".join(f"<th>{escape(column)}</th>" for column in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{escape('' if value is None else str(value))}</td>"
                                    for value in row) + "</tr>"
                   for row in table.head(SHOWN).iter_rows())
    return (f'<div class="wide"><table class="corpus"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _left_out(total: int, what: str) -> str:
    if total <= SHOWN:
        return ""
    return f'<p class="muted">the first {SHOWN} listed; {total - SHOWN} more {what} left out</p>'
