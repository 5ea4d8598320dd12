"""KET-RAG's keyword–sub-chunk bipartite graph (Alg. 3, keyword part) — no LLM.

Writes the sub-chunks as retrieval units (same columns as chunks, ``chunk_id``
holding the sub-chunk id), the keyword graph, and two LanceDB tables: keyword
vectors (mean sentence embeddings) and sub-chunk vectors.
"""

from __future__ import annotations

import polars as pl

from kgrag.contents.bipartite import write_bipartite
from kgrag.contents.chunks import read_chunks
from kgrag.contents.columns import counted
from kgrag.graphs.bipartite import build_bipartite
from kgrag.graphs.subchunks import split_subchunks
from kgrag.retrieval.units import unit_text
from kgrag.steps.step import StepContext, step_kind


@step_kind("bipartite", "1")
def bipartite(ctx: StepContext) -> None:
    chunks = read_chunks(ctx.input("chunks"))
    tokenizer, embedder = ctx.models.tokenizer, ctx.models.embedder
    parts = split_subchunks(chunks, tokenizer, ctx.config["tau"])
    parts = parts.join(chunks.select("chunk_id", "title"), on="chunk_id", how="left")
    parts = parts.with_columns(context=unit_text(ctx.config.get("title", True)))
    units = counted(parts.select(
        pl.col("subchunk_id").alias("chunk_id"), pl.col("chunk_id").alias("parent_chunk_id"),
        "doc_id", "j", "title", "text", "context"), "context", "context_tokens", tokenizer)
    graph = build_bipartite(parts, embedder.encode)
    write_bipartite(ctx.out_dir, units, graph.keywords, graph.edges,
                    embedder.encode(units["context"].to_list()))
    ctx.notes.update(subchunks=units.height, keywords=graph.keywords.height,
                     edges=graph.edges.height, sentences=graph.sentences.height)
