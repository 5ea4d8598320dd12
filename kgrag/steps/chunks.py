"""Step ``chunk``: documents → chunks.parquet, each chunk also rendered as a retrieval unit.

A unit's context text is ``# <title>`` followed by the chunk text (the chunk text
alone with ``chunking.title: false``); it is what
gets embedded, what fills the budget and what the LLM reads, so its token
count (``context_tokens``) is the one every budget is charged with.

A documents folder's chunks also say where they came from (``kgrag.corpus.sources``):
the ``file``, the PDF ``page`` they start on and the one they end on (``page_end``), and
the ``heading`` most of their text lies under. Other corpora's chunks have no such
columns, so their artefacts are unchanged.
"""

from __future__ import annotations

from kgrag.contents.chunks import write_chunks
from kgrag.contents.columns import counted
from kgrag.contents.corpus import read_documents, read_sections
from kgrag.corpus import chunk_documents
from kgrag.corpus.sources import with_sources
from kgrag.retrieval.units import unit_text
from kgrag.steps.step import StepContext, step_kind


@step_kind("chunk", "1")
def chunk(ctx: StepContext) -> None:
    documents = read_documents(ctx.input("corpus"))
    tokenizer = ctx.models.tokenizer
    chunks = chunk_documents(documents, tokenizer, ctx.config["size"], ctx.config["overlap"])
    chunks = chunks.join(documents.select("doc_id", "title"), on="doc_id", how="left")
    chunks = chunks.with_columns(context=unit_text(ctx.config["title"]))
    chunks = counted(chunks, "context", "context_tokens", tokenizer)
    sections = read_sections(ctx.input("corpus"))
    if sections is not None:
        chunks = with_sources(chunks, sections)
    write_chunks(ctx.out_dir, chunks)
    ctx.notes.update(chunks=chunks.height, tokens=int(chunks["context_tokens"].sum()))
