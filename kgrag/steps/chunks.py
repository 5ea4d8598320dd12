"""Step ``chunk``: documents → chunks.parquet, each chunk also rendered as a retrieval unit.

A unit's context text is ``# <title>`` followed by the chunk text (the chunk text
alone with ``chunking.title: false``); it is what
gets embedded, what fills the budget and what the LLM reads, so its token
count (``context_tokens``) is the one every budget is charged with.

A documents folder's chunks also say where they came from (``kgrag.corpus.sources``):
the ``file``, the PDF ``page`` they start on and the one they end on (``page_end``), and
the ``heading`` most of their text lies under. Other corpora's chunks have no such
columns, so their artefacts are unchanged.

Rebuilt over a changed corpus, the step takes the chunks of every document whose row and
sections are unchanged from its earlier artefact (``kgrag.contents.chunks.read_kept``)
and cuts only the documents added or changed: the same table, at the cost of the new
documents.
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from kgrag.contents.chunks import document_digests, read_kept, write_chunks
from kgrag.contents.columns import counted
from kgrag.contents.corpus import read_documents, read_sections
from kgrag.corpus import chunk_documents
from kgrag.corpus.sources import with_sources
from kgrag.retrieval.units import unit_text
from kgrag.steps.step import StepContext, step_kind

# Documents cut at a time: the step holds their chunks' rows, never the corpus's (the
# writer holds at most a row group).
CUT_DOCUMENTS = 1_000


@step_kind("chunk", "1")
def chunk(ctx: StepContext) -> None:
    documents = read_documents(ctx.input("corpus"))
    sections = read_sections(ctx.input("corpus"))
    digests = document_digests(documents, sections)
    kept = ctx.from_earlier(lambda earlier: read_kept(earlier, digests))
    if kept is not None:
        ctx.notes["reused_documents"] = kept["doc_id"].n_unique()
    tokens = 0

    def parts() -> Iterator[pl.DataFrame]:
        nonlocal tokens
        slices = documents.iter_slices(CUT_DOCUMENTS) if documents.height else [documents]
        for batch in slices:
            if kept is None:
                chunks = _cut(ctx, batch, sections)
            else:  # the documents the earlier build cut, as it cut them, then the others
                ids = batch["doc_id"].implode()
                taken = kept.filter(pl.col("doc_id").is_in(ids))
                todo = batch.filter(~pl.col("doc_id").is_in(taken["doc_id"].implode()))
                order = batch.select("doc_id").with_row_index("position")
                chunks = (pl.concat([taken, _cut(ctx, todo, sections)]) if todo.height
                          else taken).join(order, on="doc_id").sort("position", "idx").drop(
                    "position")
            tokens += int(chunks["context_tokens"].sum())
            yield chunks

    written = write_chunks(ctx.out_dir, parts(), digests)
    ctx.notes.update(chunks=written, tokens=tokens)


def _cut(ctx: StepContext, documents: pl.DataFrame, sections: pl.DataFrame | None
         ) -> pl.DataFrame:
    """The chunks of ``documents``, each rendered as a retrieval unit and counted."""
    tokenizer = ctx.models.tokenizer
    chunks = chunk_documents(documents, tokenizer, ctx.config["size"], ctx.config["overlap"])
    chunks = chunks.join(documents.select("doc_id", "title"), on="doc_id", how="left")
    chunks = chunks.with_columns(context=unit_text(ctx.config["title"]))
    chunks = counted(chunks, "context", "context_tokens", tokenizer)
    if sections is None:
        return chunks
    return with_sources(chunks, sections.filter(
        pl.col("doc_id").is_in(documents["doc_id"].implode())))
