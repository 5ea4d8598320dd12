"""Columns that several artefacts compute the same way."""

from __future__ import annotations

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
