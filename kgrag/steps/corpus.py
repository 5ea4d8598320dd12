"""Step ``import``: the spec's corpus → documents.parquet + questions.parquet."""

from __future__ import annotations

from kgrag.corpus import load_corpus
from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext

DOCUMENTS = "documents.parquet"
QUESTIONS = "questions.parquet"


@step_kind("import", "1")
def import_corpus(ctx: StepContext) -> None:
    corpus = load_corpus(ctx.spec.corpus, ctx.spec.path.parent)
    corpus.documents.write_parquet(ctx.out_dir / DOCUMENTS)
    corpus.questions.write_parquet(ctx.out_dir / QUESTIONS)
    ctx.notes.update(documents=corpus.documents.height, questions=corpus.questions.height)
