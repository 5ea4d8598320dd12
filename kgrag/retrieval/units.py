"""Retrieval units: the chunks as a strategy sees them (context text, size, source document)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

CHUNKS_FILE = "chunks.parquet"


@dataclass(frozen=True)
class Units:
    """Chunk id → rendered context text, its token count and its document."""

    text: dict[str, str]
    tokens: dict[str, int]
    doc: dict[str, str]

    @classmethod
    def load(cls, chunks_dir: Path) -> Units:
        df = pl.read_parquet(chunks_dir / CHUNKS_FILE, columns=["chunk_id", "doc_id", "context",
                                                                "context_tokens"])
        ids = df["chunk_id"].to_list()
        return cls(dict(zip(ids, df["context"].to_list())),
                   dict(zip(ids, df["context_tokens"].to_list())),
                   dict(zip(ids, df["doc_id"].to_list())))

    def context(self, ids: list[str]) -> str:
        return "\n\n".join(self.text[i] for i in ids)
