"""The in-memory corpus every pipeline stage starts from.

A corpus is two Polars frames: the documents to index and, for benchmark
datasets, the questions to ask against them. Keeping both in one frozen value
means later stages (chunking, indexing, evaluation) never re-read the source
files and cannot disagree about which subset was loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import polars as pl

DOCUMENT_SCHEMA: dict[str, pl.DataType] = {
    "doc_id": pl.String(),
    "title": pl.String(),
    "text": pl.String(),
}

QUESTION_SCHEMA: dict[str, pl.DataType] = {
    "question_id": pl.String(),
    "question": pl.String(),
    "answers": pl.List(pl.String()),
    "supporting_doc_ids": pl.List(pl.String()),
}


def make_doc_id(title: str, text: str) -> str:
    """Derive a document id from its content.

    Hashing title and text (rather than numbering documents) gives a paragraph
    the same id whichever question subset brought it in, so artefacts and
    caches built from a ``limit: 30`` run stay valid for the full run.
    """
    digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()
    return "d" + digest[:12]


def empty_questions() -> pl.DataFrame:
    """Return a questions frame with no rows but the full schema.

    Plain corpora have no questions; giving them a correctly typed empty frame
    lets downstream code filter, join and concatenate without special cases.
    """
    return pl.DataFrame(schema=QUESTION_SCHEMA)


@dataclass(frozen=True)
class Corpus:
    """Documents to index plus the questions (possibly none) to evaluate.

    ``documents`` has columns ``doc_id``, ``title``, ``text`` in order of first
    appearance, one row per distinct (title, text). ``questions`` has columns
    ``question_id``, ``question``, ``answers`` (gold answer first, then
    aliases) and ``supporting_doc_ids`` (ids into ``documents``).
    """

    documents: pl.DataFrame
    questions: pl.DataFrame
