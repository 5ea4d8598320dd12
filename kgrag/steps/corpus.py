"""Step ``import``: the spec's corpus → the corpus artefact (``kgrag.contents.corpus``).

Sentences are empty except for datasets with sentence-level gold (HolisQA), triples
except for datasets with gold facts (2Wiki), decompositions except for datasets that
decompose their questions (MuSiQue). A corpus artefact built before gold triples or
decompositions were kept has no ``triples.parquet`` or ``decompositions.parquet``; the
step's version is unchanged on purpose, so that adding the files did not invalidate
every landed run (the steps that read them say how to rebuild it: ``--force corpus``).
"""

from __future__ import annotations

from kgrag.contents.corpus import write_corpus
from kgrag.corpus import load_corpus
from kgrag.pipeline.step import StepContext, step_kind


@step_kind("import", "2")
def import_corpus(ctx: StepContext) -> None:
    corpus = load_corpus(ctx.spec.corpus, ctx.spec.path.parent)
    write_corpus(ctx.out_dir, corpus)
    ctx.notes.update(documents=corpus.documents.height, questions=corpus.questions.height,
                     sentences=corpus.sentences.height, triples=corpus.triples.height,
                     decompositions=corpus.decompositions["question_id"].n_unique())
