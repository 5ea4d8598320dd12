"""Hand-checked sentence splits: abbreviations, decimals, quotes, initials, spans."""

from __future__ import annotations

import pytest

from kgrag.corpus import split_sentences
from kgrag.corpus.sentences import sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Dr. Smith met Mr. Jones at St. Paul. They talked.",
            ["Dr. Smith met Mr. Jones at St. Paul.", "They talked."],
        ),
        (
            "The value rose to 3.14 in 2019. In 2020 it was 2.5 again.",
            ["The value rose to 3.14 in 2019.", "In 2020 it was 2.5 again."],
        ),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        (
            "J. R. R. Tolkien wrote it. He was born in 1892.",
            ["J. R. R. Tolkien wrote it.", "He was born in 1892."],
        ),
        (
            "The U.S. Army won. It was 1945! Really? Yes.",
            ["The U.S. Army won.", "It was 1945!", "Really?", "Yes."],
        ),
        (
            "Fruit, e.g. Fuji apples, is sweet. No. 5 is Acme Inc. and Co. at best.",
            ["Fruit, e.g. Fuji apples, is sweet.", "No. 5 is Acme Inc. and Co. at best."],
        ),
        ("It ended (in 1990.) Later it began.", ["It ended (in 1990.)", "Later it began."]),
        ("Lower case after a dot. does not split.", ["Lower case after a dot. does not split."]),
        ('She asked why. "Because," he said.', ["She asked why.", '"Because," he said.']),
        ("# Title\n\nFirst line\nSame sentence.", ["# Title", "First line\nSame sentence."]),
        ("", []),
        ("   \n ", []),
    ],
)
def test_sentences(text: str, expected: list[str]):
    assert sentences(text) == expected


def test_spans_exclude_whitespace_and_cover_all_text():
    text = "  First one.   Second one!\n\n  Third?  "
    spans = split_sentences(text)
    assert spans == [(2, 12), (15, 26), (30, 36)]
    covered = "".join(text[start:end] for start, end in spans)
    assert "".join(covered.split()) == "".join(text.split())
