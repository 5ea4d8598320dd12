"""The in-memory corpus every pipeline stage starts from.

A corpus is four Polars frames: the documents to index, for benchmark
datasets the questions to ask against them, where a dataset marks gold
evidence at sentence level (HolisQA) the sentences with their character
spans, where it marks gold facts (2Wiki's ``evidences``) the gold
triples, and where it decomposes questions (MuSiQue) the gold sub-questions; those are
empty otherwise. Keeping them in one frozen value means later stages
(chunking, indexing, evaluation) never re-read the source files and cannot
disagree about which subset was loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

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
    "gold_sentence_ids": pl.List(pl.String()),
}

SENTENCE_SCHEMA: dict[str, pl.DataType] = {
    "sentence_id": pl.String(),
    "doc_id": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "text": pl.String(),
}

TRIPLE_SCHEMA: dict[str, pl.DataType] = {
    "question_id": pl.String(),
    "subject": pl.String(),
    "relation": pl.String(),
    "object": pl.String(),
}

DECOMPOSITION_SCHEMA: dict[str, pl.DataType] = {
    "question_id": pl.String(),
    "step": pl.Int64(),
    "question": pl.String(),
    "answer": pl.String(),
}

KG_SCHEMA: dict[str, pl.DataType] = {
    "triple_id": pl.String(),
    "head": pl.String(),
    "relation": pl.String(),
    "tail": pl.String(),
}

TOPIC_SCHEMA: dict[str, pl.DataType] = {
    "question_id": pl.String(),
    "entity": pl.String(),
}

SECTION_SCHEMA: dict[str, pl.DataType] = {
    "doc_id": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "file": pl.String(),
    "page": pl.Int64(),
    "heading": pl.String(),
}

SOURCE_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "sha256": pl.String(),
    "status": pl.String(),
    "detail": pl.String(),
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


def empty_sentences() -> pl.DataFrame:
    """Return a sentences frame with no rows but the full schema.

    Only datasets with sentence-level gold evidence fill it; the typed empty
    frame lets every other corpus be written and read the same way.
    """
    return pl.DataFrame(schema=SENTENCE_SCHEMA)


def empty_triples() -> pl.DataFrame:
    """Return a gold-triples frame with no rows but the full schema (every dataset
    but 2Wiki), so extraction benchmarks read one layout."""
    return pl.DataFrame(schema=TRIPLE_SCHEMA)


def empty_decompositions() -> pl.DataFrame:
    """Return a gold-decompositions frame with no rows but the full schema (every dataset
    but MuSiQue)."""
    return pl.DataFrame(schema=DECOMPOSITION_SCHEMA)


def empty_kg() -> pl.DataFrame:
    """A knowledge-graph frame with no rows: every corpus but a KGQA one."""
    return pl.DataFrame(schema=KG_SCHEMA)


def empty_topics() -> pl.DataFrame:
    """A topic-entities frame with no rows: every corpus but a KGQA one."""
    return pl.DataFrame(schema=TOPIC_SCHEMA)


def empty_sections() -> pl.DataFrame:
    """A sections frame with no rows: every corpus but a ``documents`` folder."""
    return pl.DataFrame(schema=SECTION_SCHEMA)


def empty_sources() -> pl.DataFrame:
    """A sources frame with no rows: every corpus but a folder's."""
    return pl.DataFrame(schema=SOURCE_SCHEMA)


@dataclass(frozen=True)
class Corpus:
    """Documents to index plus the questions (possibly none) to evaluate.

    ``documents`` has columns ``doc_id``, ``title``, ``text`` in order of first
    appearance, one row per distinct (title, text). ``questions`` has columns
    ``question_id``, ``question``, ``answers`` (gold answer first, then
    aliases), ``supporting_doc_ids`` (ids into ``documents``) and
    ``gold_sentence_ids`` (ids into ``sentences``; empty lists for datasets
    without sentence-level gold). ``sentences`` has columns ``sentence_id``,
    ``doc_id``, ``start``, ``end`` (the sentence is ``text[start:end]`` of its
    document, so it can be matched against chunk spans exactly) and ``text``;
    it defaults to an empty frame, so importers without sentences need not
    mention it. ``triples`` has columns ``question_id``, ``subject``,
    ``relation``, ``object``: the gold facts a question rests on, as the
    dataset names them (the benchmark of extraction methods); empty by default.
    ``decompositions`` has columns ``question_id``, ``step`` (from 1), ``question``,
    ``answer``: a question's gold single-hop sub-questions in order, as the dataset
    writes them (MuSiQue's ``question_decomposition``, where ``#k`` stands for step k's
    answer), for RAS's oracle planner; empty by default.
    A knowledge-graph corpus (KGQA) also has ``kg``, its triples (``triple_id``,
    ``head``, ``relation``, ``tail``; the documents are the same triples as text, so a
    question's ``supporting_doc_ids`` are its gold triples' ids), and ``topics``, each
    question's topic entities (``question_id``, ``entity``); both empty otherwise.
    A ``documents`` folder also has ``sections``, where each document's text came from
    (``doc_id``, the span ``start`` / ``end``, the ``file``, its PDF ``page`` and the
    ``heading`` above it; a chunk cites the file and page it starts in and the heading
    most of it lies under), and ``sources``, one
    row per file of the folder (``file``, ``sha256``, ``status``: ``converted``,
    ``cached`` or the kind of failure, and its ``detail``); both empty otherwise, but
    for a ``text`` folder's ``sources``: the links it skipped (status ``outside``,
    ``kgrag.corpus.folder``).
    ``questions_missing_support`` names the questions of a user's questions file left
    out because a supporting document they name is not in the corpus (a removed file);
    they are in no frame.
    """

    documents: pl.DataFrame
    questions: pl.DataFrame
    sentences: pl.DataFrame = field(default_factory=empty_sentences)
    triples: pl.DataFrame = field(default_factory=empty_triples)
    decompositions: pl.DataFrame = field(default_factory=empty_decompositions)
    kg: pl.DataFrame = field(default_factory=empty_kg)
    topics: pl.DataFrame = field(default_factory=empty_topics)
    sections: pl.DataFrame = field(default_factory=empty_sections)
    sources: pl.DataFrame = field(default_factory=empty_sources)
    questions_missing_support: tuple[str, ...] = ()
