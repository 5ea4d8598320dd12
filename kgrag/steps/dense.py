"""Step ``dense_index``: embed every retrieval unit into a LanceDB table."""

from __future__ import annotations

import polars as pl

from kgrag.pipeline.step import StepContext, step_kind
from kgrag.retrieval.naive import DENSE_TABLE
from kgrag.retrieval.units import CHUNKS_FILE
from kgrag.store.vectors import VectorTable


@step_kind("dense_index", "1")
def dense_index(ctx: StepContext) -> None:
    chunks = pl.read_parquet(ctx.input("chunks") / CHUNKS_FILE, columns=["chunk_id", "context"])
    texts = chunks["context"].to_list()
    vectors = ctx.models.embedder.encode(texts)  # reports its own progress
    VectorTable.create(ctx.out_dir, DENSE_TABLE, chunks["chunk_id"].to_list(), vectors)
    ctx.notes.update(vectors=len(texts), dim=int(vectors.shape[1]))
