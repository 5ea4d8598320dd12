"""The ``corpus`` artefact (step ``import``): documents, questions, gold sentences, gold
triples and gold decompositions, one table each (``kgrag.corpus.corpus`` describes their
columns); for a documents folder also its sections and sources (for a text folder, its
sources when it skipped links that lead out of it).

``sentences.parquet``, ``triples.parquet`` and ``decompositions.parquet`` are written even
when empty, so readers see one layout (``kgrag.steps.corpus`` says why an older corpus
artefact may lack the last two).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kgrag.corpus.corpus import Corpus
from kgrag.errors import KgragError

DOCUMENTS = "documents.parquet"
QUESTIONS = "questions.parquet"
SENTENCES = "sentences.parquet"
TRIPLES = "triples.parquet"
DECOMPOSITIONS = "decompositions.parquet"
KG = "kg.parquet"  # a knowledge-graph corpus's triples, and its questions' topic entities
TOPICS = "topics.parquet"
SECTIONS = "sections.parquet"  # a documents folder's: where each document's text came from
SOURCES = "sources.parquet"  # and what became of each of its files


def write_corpus(folder: Path, corpus: Corpus) -> None:
    corpus.documents.write_parquet(folder / DOCUMENTS)
    corpus.questions.write_parquet(folder / QUESTIONS)
    corpus.sentences.write_parquet(folder / SENTENCES)
    corpus.triples.write_parquet(folder / TRIPLES)
    corpus.decompositions.write_parquet(folder / DECOMPOSITIONS)
    if not corpus.kg.is_empty():  # only a KGQA corpus has them
        corpus.kg.write_parquet(folder / KG)
        corpus.topics.write_parquet(folder / TOPICS)
    if not corpus.sections.is_empty():  # only a documents folder has them
        corpus.sections.write_parquet(folder / SECTIONS)
    if not corpus.sources.is_empty():  # a documents folder, or links skipped in a folder
        corpus.sources.write_parquet(folder / SOURCES)


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


def read_decompositions(folder: Path) -> pl.DataFrame | None:
    """The gold decompositions, or None for a corpus artefact written before they were
    kept."""
    path = folder / DECOMPOSITIONS
    return pl.read_parquet(path) if path.exists() else None


def read_kg(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A knowledge-graph corpus's triples and its questions' topic entities."""
    if not (folder / KG).exists():
        raise KgragError(f"{folder.name}: this corpus has no knowledge graph; a triple "
                         "strategy or ReG training needs a KGQA corpus (dataset: kgqa)")
    return pl.read_parquet(folder / KG), pl.read_parquet(folder / TOPICS)


def read_sections(folder: Path) -> pl.DataFrame | None:
    """A documents folder's sections (file, page, heading of each span); None for every
    other corpus."""
    path = folder / SECTIONS
    return pl.read_parquet(path) if path.exists() else None


def read_sources(folder: Path) -> pl.DataFrame | None:
    """A documents folder's files with what became of each, a text folder's links that
    lead out of it (``kgrag.corpus.folder``); None for every other corpus."""
    path = folder / SOURCES
    return pl.read_parquet(path) if path.exists() else None
