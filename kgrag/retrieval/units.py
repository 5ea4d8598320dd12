"""Retrieval units, and the evidence a strategy hands to the LLM."""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from kgrag.errors import KgragError, writing
from kgrag.retrieval.budget import fill_budget

V = TypeVar("V")


def unit_text(with_title: bool) -> pl.Expr:
    """How a retrieval unit (a chunk or a sub-chunk) is rendered from its ``title`` and
    ``text`` columns: ``# <title>`` then the text, or the text alone (``chunking.title:
    false``, for corpora whose titles are ids). What it renders is embedded, charged to
    the budget and read by the LLM, so every kind of unit renders here."""
    return pl.format("# {}\n{}", pl.col("title"), pl.col("text")) if with_title else pl.col("text")


class ByRow(Mapping[str, V]):
    """Unit id → one value, looked up by the unit's row: the columns of one table share
    the ids' row numbers, and each keeps its values compact (an array, a file)."""

    def __init__(self, rows: dict[str, int], at: Callable[[int], V]) -> None:
        self.rows, self.at = rows, at

    def __getitem__(self, unit: str) -> V:
        return self.at(self.rows[unit])

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def _writing() -> AbstractContextManager[None]:
    """A full or read-only temp folder as one error that names it (``writing``)."""
    return writing(Path(tempfile.gettempdir()), "the retrieval units' texts",
                   "free some space there, or set TMPDIR to a folder on another disk")


class FileTexts:
    """Texts by row, kept out of memory: encoded one after another in a file with no
    name in the temp folder (``TMPDIR``), each read with one ``pread`` when asked for. So
    none of them counts in the process's memory (mapped, the pages read, and the pages
    the kernel maps around each, would stay resident); the file is gone with this."""

    def __init__(self) -> None:
        self.ends = array("q")
        with _writing():
            self.file = tempfile.TemporaryFile()  # noqa: SIM115 (open while texts are read)

    def write(self, texts: list[str]) -> None:
        encoded = [text.encode() for text in texts]
        at = self.ends[-1] if self.ends else 0
        for text in encoded:
            at += len(text)
            self.ends.append(at)
        with _writing():
            self.file.write(b"".join(encoded))
            self.file.flush()  # what pread reads is the file's, not the writer's buffer

    def __call__(self, row: int) -> str:
        start = self.ends[row - 1] if row else 0
        return os.pread(self.file.fileno(), self.ends[row] - start, start).decode()


@dataclass(frozen=True)
class Units:
    """Unit id → rendered context text (``# <title>`` + text), its token count, its document.

    Chunks are units; so are KET-RAG's sub-chunks (same columns, other file). Read from a
    table (``Units.read``), the texts are read from a file when asked for and the rest is
    held in arrays by row. As three dicts of Python objects they took 1.4 KB a chunk of
    every strategy's memory at 110,056 chunks, though a question reads a few texts.
    """

    text: Mapping[str, str]
    tokens: Mapping[str, int]
    doc: Mapping[str, str]

    @classmethod
    def of(cls, df: pl.DataFrame) -> Units:
        """The units of a table with ``kgrag.contents.chunks.UNIT_COLUMNS``."""
        return cls.read([df])

    @classmethod
    def read(cls, parts: Iterable[pl.DataFrame]) -> Units:
        """The units of a table read part by part (frames with ``UNIT_COLUMNS``)."""
        rows: dict[str, int] = {}
        tokens, codes = array("i"), array("i")
        docs: dict[str, int] = {}
        texts = FileTexts()
        for part in parts:
            for unit in part["chunk_id"].to_list():
                rows.setdefault(unit, len(rows))
            if len(rows) != len(tokens) + part.height:
                raise KgragError("a unit id occurs twice in a table of retrieval units")
            tokens.extend(part["context_tokens"].to_list())
            codes.extend(docs.setdefault(d, len(docs)) for d in part["doc_id"].to_list())
            texts.write(part["context"].to_list())
        names = list(docs)
        return cls(ByRow(rows, texts), ByRow(rows, tokens.__getitem__),
                   ByRow(rows, lambda row: names[codes[row]]))

    def filled(self, ranked: list[str], budget: int) -> Evidence:
        """The context of a ranking: its units in rank order while they fit ``budget``
        (``fill_budget``), what every strategy that ranks chunks retrieves."""
        return self.context(fill_budget(ranked, self.tokens, budget))

    def context(self, ids: list[str]) -> Evidence:
        """The plain context made of these units, in this order."""
        return Evidence(ids, [self.doc[i] for i in ids], "\n\n".join(self.text[i] for i in ids),
                       sum(self.tokens[i] for i in ids))


@dataclass(frozen=True)
class Evidence:
    """What one strategy retrieved for one question.

    ``unit_ids`` are the items retrieved, in rank order, of the strategy's declared
    ``evidence`` kind: text units (chunks or sub-chunks) for every strategy of today,
    triples or entities for a strategy over a knowledge graph; ``doc_ids`` are the
    documents they come from, where they have one (recall@k reads them). ``text`` is
    exactly what the LLM reads and what coverage searches; ``tokens`` is what it cost of
    the budget. A strategy that calls an LLM while retrieving (HugRAG's causal filter)
    reports the requests and tokens, and ``trace`` holds whatever per-question record it
    keeps (JSON-serialisable).
    """

    unit_ids: list[str]
    doc_ids: list[str]
    text: str
    tokens: int
    trace: dict[str, Any] = field(default_factory=dict)
    llm_calls: int = 0
    llm_tokens_in: int = 0
    llm_tokens_out: int = 0
    llm_ms: float = 0.0  # of the retrieval's wall time, spent waiting on the LLM
