"""The ``corpus`` artefact (step ``import``): documents, questions, gold sentences and
gold triples, one table each (``kgrag.corpus.corpus`` describes their columns).

``sentences.parquet`` and ``triples.parquet`` are written even when empty, so readers
see one layout (``kgrag.steps.corpus`` says why an older corpus artefact may lack
``triples.parquet``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kgrag.corpus.corpus import Corpus

DOCUMENTS = "documents.parquet"
QUESTIONS = "questions.parquet"
SENTENCES = "sentences.parquet"
TRIPLES = "triples.parquet"


def write_corpus(folder: Path, corpus: Corpus) -> None:
    corpus.documents.write_parquet(folder / DOCUMENTS)
    corpus.questions.write_parquet(folder / QUESTIONS)
    corpus.sentences.write_parquet(folder / SENTENCES)
    corpus.triples.write_parquet(folder / TRIPLES)


def read_documents(folder: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return pl.read_parquet(folder / DOCUMENTS, columns=columns)


def read_questions(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / QUESTIONS)


def has_question_table(folder: Path) -> bool:
    return (folder / QUESTIONS).exists()


def read_sentences(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / SENTENCES)


def read_triples(folder: Path) -> pl.DataFrame | None:
    """The gold triples, or None for a corpus artefact written before they were kept."""
    path = folder / TRIPLES
    return pl.read_parquet(path) if path.exists() else None
