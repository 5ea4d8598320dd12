"""A free answer's defects (issue 41's probe) are found and mended, a sound one kept."""

from __future__ import annotations

import pytest

from kgrag.answer import INSUFFICIENT
from kgrag.answer.hygiene import mend

UNITS = ["# KET-RAG: A Cost-Efficient Framework\nKET-RAG indexes 1,088 documents.",
         "# PowerPC\nPowerPC is an instruction set made by IBM, Motorola and Apple."]


@pytest.mark.parametrize("reply, mended, defect", [
    ("1,088 | 1,088 | 1,088 | 1,088", "1,088", "repeated"),
    ("𝒢s 𝒢s 𝒢s", "𝒢s", "repeated"),
    ("(1) 1 (2) 2 (3) 3", "(1)", "repeated"),
    ("# KET-RAG: A Cost-Efficient Framework", INSUFFICIENT, "title_line"),
    ("Copenhagen", INSUFFICIENT, "example_leak"),
    ("Denmark", INSUFFICIENT, "example_leak"),
    ("IBM, Motorola and Apple", "IBM, Motorola and Apple", None),
    ("1,088", "1,088", None),
    (INSUFFICIENT, INSUFFICIENT, None),
])
def test_defects_are_mended(reply, mended, defect):
    assert mend(reply, UNITS, "Who made PowerPC?") == (mended, defect)


def test_an_example_word_the_context_names_is_no_leak():
    units = ["# Danish chess\nThe 1888 tournament was held in Copenhagen."]
    assert mend("Copenhagen", units, "Where was the tournament held?") == ("Copenhagen", None)
