"""Step ``dense_index``: embed every retrieval unit into a LanceDB table, a part of the
chunks at a time, with an ANN index past the spec's ``dense_index.ann.min_rows``, and
write its vectors as a matrix file for the strategies that map it.
Rebuilt over a changed corpus, the step grows its earlier table and index rather than
indexing every row anew (``kgrag.contents.dense.grow_dense``)."""

from __future__ import annotations

import numpy as np

from kgrag.contents.dense import grow_dense, write_dense, write_matrix
from kgrag.progress import Progress
from kgrag.steps.step import StepContext, step_kind


@step_kind("dense_index", "2")
def dense_index(ctx: StepContext) -> None:
    chunks, ann = ctx.input("chunks"), ctx.config.get("ann")
    # the spec's embedder, or a strategy's own (by identity: its config names it)
    embedder = ctx.models.embedder_of(ctx.config["embedder"])

    def embed(texts: list[str], progress: Progress) -> np.ndarray:
        return embedder.encode(texts, ctx.executor, progress)

    grown = ctx.from_earlier(
        lambda earlier: grow_dense(ctx.out_dir, earlier, chunks, ctx.own(embed), ann))
    table = write_dense(ctx.out_dir, chunks, embed, ann) if grown is None else grown
    write_matrix(ctx.out_dir, table)
    ctx.notes.update(vectors=len(table), dim=table.dim,
                     **({"ann": table.ann["index"]} if table.ann else {}),
                     **({"folded_rows": table.folded} if grown else {}))
