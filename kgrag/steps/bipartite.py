"""KET-RAG's keyword–sub-chunk bipartite graph (Alg. 3, keyword part) — no LLM.

Writes the sub-chunks as retrieval units (same columns as chunks, ``chunk_id``
holding the sub-chunk id), the keyword graph, and two LanceDB tables: keyword
vectors (mean sentence embeddings) and sub-chunk vectors.
"""

from __future__ import annotations

import polars as pl

from kgrag.graphs.bipartite import build_bipartite
from kgrag.graphs.subchunks import split_subchunks
from kgrag.pipeline.step import StepContext, step_kind
from kgrag.retrieval.ket import EDGES_FILE, KEYWORD_TABLE, SUBCHUNK_TABLE, SUBCHUNKS_FILE
from kgrag.retrieval.units import CHUNKS_FILE, unit_text
from kgrag.store.vectors import VectorTable

KEYWORDS = "keywords.parquet"


@step_kind("bipartite", "1")
def bipartite(ctx: StepContext) -> None:
    chunks = pl.read_parquet(ctx.input("chunks") / CHUNKS_FILE)
    tokenizer, embedder = ctx.models.tokenizer, ctx.models.embedder
    parts = split_subchunks(chunks, tokenizer, ctx.config["tau"])
    parts = parts.join(chunks.select("chunk_id", "title"), on="chunk_id", how="left")
    parts = parts.with_columns(context=unit_text(ctx.config.get("title", True)))
    units = parts.select(
        pl.col("subchunk_id").alias("chunk_id"), pl.col("chunk_id").alias("parent_chunk_id"),
        "doc_id", "j", "title", "text", "context",
        context_tokens=pl.Series(tokenizer.count_many(parts["context"].to_list()),
                                 dtype=pl.Int64))
    units.write_parquet(ctx.out_dir / SUBCHUNKS_FILE)
    graph = build_bipartite(parts, embedder.encode)
    graph.keywords.select("keyword", "n_subchunks").write_parquet(ctx.out_dir / KEYWORDS)
    graph.edges.write_parquet(ctx.out_dir / EDGES_FILE)
    VectorTable.create(ctx.out_dir, KEYWORD_TABLE, graph.keywords["keyword"].to_list(),
                       graph.keywords["vector"].to_numpy())
    VectorTable.create(ctx.out_dir, SUBCHUNK_TABLE, units["chunk_id"].to_list(),
                       embedder.encode(units["context"].to_list()))
    ctx.notes.update(subchunks=units.height, keywords=graph.keywords.height,
                     edges=graph.edges.height, sentences=graph.sentences.height)
