"""Columns that several artefacts compute the same way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from kgrag.corpus.tokenizer import Tokenizer

ColumnTypes = dict[str, pl.DataType | type[pl.DataType]]
"""A table's columns as polars takes them: a type's class (``pl.String``) or an instance
(``pl.List(pl.String)``) for each."""


def counted(frame: pl.DataFrame, text: str, tokens: str, tokenizer: Tokenizer) -> pl.DataFrame:
    """``frame`` with column ``tokens``: the token count of each row's ``text`` column.

    Budgets are charged with counts stored at build time (a chunk's
    ``context_tokens``, a skeleton row's ``row_tokens``, a HugRAG node's ``tokens``),
    so every stored count comes from here.
    """
    return frame.with_columns(
        pl.Series(tokens, tokenizer.count_many(frame[text].to_list()), dtype=pl.Int64))


def parquet_parts(path: Path, columns: list[str], rows: int) -> Iterator[pl.DataFrame]:
    """A Parquet table's ``columns`` in its order, ``rows`` rows at a time: the reader
    decodes one row group at a time, never the whole table. Arrow's memory pool keeps
    the pages it decoded into (260 MB at 715,914 nlp entities, 128 MB for the texts of
    110,056 chunks), for Arrow alone: they are handed back once the table is read."""
    import pyarrow as pa  # imported where it reads, not by every command
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as table:
        for batch in table.iter_batches(rows, columns=columns):
            yield pl.DataFrame(pl.from_arrow(batch))
    pa.default_memory_pool().release_unused()
