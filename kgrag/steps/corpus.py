"""Step ``import``: the spec's corpus → the corpus artefact (``kgrag.contents.corpus``).

Sentences are empty except for datasets with sentence-level gold (HolisQA), triples
except for datasets with gold facts (2Wiki), decompositions except for datasets that
decompose their questions (MuSiQue). A corpus artefact built before gold triples or
decompositions were kept has no ``triples.parquet`` or ``decompositions.parquet``; the
step's version is unchanged on purpose, so that adding the files did not invalidate
every landed run (the steps that read them say how to rebuild it: ``--force corpus``).

A documents folder's files are converted through a cache beside the model calls' (so a
rerun, or another spec over the same files, converts nothing it converted before); the
step's notes count the files converted, served by the cache and skipped, by kind of
failure, and ``sources.parquet`` names each skipped file with why. A ``text`` folder's
only skipped files are links that lead out of it (``kgrag.corpus.folder``), counted
the same way.

A corpus with the user's own questions counts those left out because a supporting
document they name is not in it (``questions_skipped_missing_support``).
"""

from __future__ import annotations

from kgrag.contents.corpus import write_corpus
from kgrag.corpus import load_corpus
from kgrag.corpus.importers import IMPORTERS
from kgrag.steps.step import StepContext, step_kind

CONVERTED = "converted"  # the conversion cache's folder inside the spec's cache folder


@step_kind("import", "2")
def import_corpus(ctx: StepContext) -> None:
    corpus = load_corpus(ctx.spec.corpus, ctx.spec.path.parent,
                         ctx.spec.cache_dir / CONVERTED)
    write_corpus(ctx.out_dir, corpus)
    ctx.notes.update(documents=corpus.documents.height, questions=corpus.questions.height,
                     sentences=corpus.sentences.height, triples=corpus.triples.height,
                     decompositions=corpus.decompositions["question_id"].n_unique())
    if "questions_file" in ctx.spec.corpus:
        ctx.notes.update(questions_skipped_missing_support=len(
            corpus.questions_missing_support))
    if not corpus.sources.is_empty():  # a folder's files: what became of each
        statuses = corpus.sources["status"].value_counts(sort=True).iter_rows()
        counts = dict(statuses)
        if IMPORTERS[ctx.spec.corpus["dataset"]].converts:  # it lists every file it read
            ctx.notes.update(files=corpus.sources.height, converted=counts.pop("converted", 0),
                             cached=counts.pop("cached", 0))
        ctx.notes.update(skipped=sum(counts.values()),
                         **{f"skipped_{kind}": n for kind, n in sorted(counts.items())})
