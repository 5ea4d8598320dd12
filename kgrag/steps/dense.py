"""Step ``dense_index``: embed every retrieval unit into a LanceDB table, with an ANN
index past the spec's ``dense_index.ann.min_rows``. Rebuilt over a changed corpus, the
step grows its earlier table and index rather than indexing every row anew
(``kgrag.store.vectors.VectorTable.grow``)."""

from __future__ import annotations

from kgrag.contents.chunks import read_chunks
from kgrag.contents.dense import grow_dense, write_dense
from kgrag.steps.step import StepContext, step_kind


@step_kind("dense_index", "1")
def dense_index(ctx: StepContext) -> None:
    chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "context"])
    texts = chunks["context"].to_list()
    # the spec's embedder, or a strategy's own (by identity: its config names it)
    vectors = ctx.models.embedder_of(ctx.config["embedder"]).encode(texts, ctx.executor)
    ids, ann = chunks["chunk_id"].to_list(), ctx.config.get("ann")
    grown = ctx.from_earlier(lambda earlier: grow_dense(ctx.out_dir, earlier, ids, vectors, ann))
    table = write_dense(ctx.out_dir, ids, vectors, ann) if grown is None else grown
    ctx.notes.update(vectors=len(texts), dim=int(vectors.shape[1]),
                     **({"ann": table.ann["index"]} if table.ann else {}),
                     **({"folded_rows": table.folded} if grown else {}))
