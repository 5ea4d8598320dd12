"""Retrieval units, and the evidence a strategy hands to the LLM."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from kgrag.retrieval.budget import fill_budget


def unit_text(with_title: bool) -> pl.Expr:
    """How a retrieval unit (a chunk or a sub-chunk) is rendered from its ``title`` and
    ``text`` columns: ``# <title>`` then the text, or the text alone (``chunking.title:
    false``, for corpora whose titles are ids). What it renders is embedded, charged to
    the budget and read by the LLM, so every kind of unit renders here."""
    return pl.format("# {}\n{}", pl.col("title"), pl.col("text")) if with_title else pl.col("text")


@dataclass(frozen=True)
class Units:
    """Unit id → rendered context text (``# <title>`` + text), its token count, its document.

    Chunks are units; so are KET-RAG's sub-chunks (same columns, other file).
    """

    text: dict[str, str]
    tokens: dict[str, int]
    doc: dict[str, str]

    @classmethod
    def of(cls, df: pl.DataFrame) -> Units:
        """The units of a table with ``kgrag.contents.chunks.UNIT_COLUMNS``."""
        ids = df["chunk_id"].to_list()
        return cls(dict(zip(ids, df["context"].to_list())),
                   dict(zip(ids, df["context_tokens"].to_list())),
                   dict(zip(ids, df["doc_id"].to_list())))

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
