"""Step ``import``: the spec's corpus → documents.parquet, questions.parquet, sentences.parquet.

``sentences.parquet`` is empty except for datasets with sentence-level gold
(HolisQA); it is always written so the evaluate step reads one layout.
"""

from __future__ import annotations

from kgrag.corpus import load_corpus
from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext

DOCUMENTS = "documents.parquet"
QUESTIONS = "questions.parquet"
SENTENCES = "sentences.parquet"


@step_kind("import", "2")
def import_corpus(ctx: StepContext) -> None:
    corpus = load_corpus(ctx.spec.corpus, ctx.spec.path.parent)
    corpus.documents.write_parquet(ctx.out_dir / DOCUMENTS)
    corpus.questions.write_parquet(ctx.out_dir / QUESTIONS)
    corpus.sentences.write_parquet(ctx.out_dir / SENTENCES)
    ctx.notes.update(documents=corpus.documents.height, questions=corpus.questions.height,
                     sentences=corpus.sentences.height)
