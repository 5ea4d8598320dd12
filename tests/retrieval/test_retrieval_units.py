"""Retrieval units read from a table a part at a time: the texts kept in a file and read
when asked for, the token counts and documents in arrays, each by the unit's row."""

from __future__ import annotations

import polars as pl
import pytest

from kgrag.errors import KgragError
from kgrag.retrieval.units import Units

ROWS = [("c1", "d1", "# Zürich\nThe city on the Limmat.", 9),
        ("c2", "d1", "# Zürich\nIts old town — the Altstadt.", 10),
        ("c3", "d2", "", 0),
        ("c4", "d3", "# 東京\n東京は日本の首都です。", 12),
        ("c5", "d2", "# Bern\nThe federal city.", 6)]


def frame(rows: list[tuple[str, str, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["chunk_id", "doc_id", "context", "context_tokens"],
                        orient="row")


def test_units_read_in_parts_are_those_of_the_whole_table() -> None:
    units = Units.read([frame(ROWS[:2]), frame(ROWS[2:3]), frame(ROWS[3:])])
    assert list(units.text) == [r[0] for r in ROWS] and len(units.text) == len(ROWS)
    for unit, doc, text, tokens in reversed(ROWS):  # any order: each read by its row
        assert (units.text[unit], units.doc[unit], units.tokens[unit]) == (text, doc, tokens)
    assert dict(units.text) == Units.of(frame(ROWS)).text == {r[0]: r[2] for r in ROWS}
    assert "c9" not in units.text
    with pytest.raises(KeyError):
        units.tokens["c9"]
    evidence = units.context(["c4", "c1"])
    assert evidence.doc_ids == ["d3", "d1"] and evidence.tokens == 21
    assert evidence.text == ROWS[3][2] + "\n\n" + ROWS[0][2]
    assert units.filled(["c2", "c5", "c1"], 16).unit_ids == ["c2", "c5"]


def test_a_unit_named_twice_is_refused() -> None:
    with pytest.raises(KgragError, match="twice"):
        Units.read([frame(ROWS[:2]), frame(ROWS[1:3])])
