"""Candidate answers are verbatim spans of the units, typed by what the question asks."""

from __future__ import annotations

import pytest

from kgrag.answer.spans import candidates, occurrence, read_question, units_holding

UNITS = [
    ("# Christmas Meeting of 1888\nThe Christmas Meeting of 1888 was a chess tournament held "
     "in Copenhagen. It was won by Emanuel Lasker on 28 December 1888."),
    "# Copenhagen\nCopenhagen is the capital of Denmark. About 1,300,000 people live there.",
]


def test_every_candidate_is_verbatim_in_its_unit_and_each_text_comes_once():
    found = candidates(UNITS, "Who won the chess tournament held in Copenhagen?", limit=50)
    assert found
    for c in found:
        assert c.text in UNITS[c.unit] and not c.text.startswith(("#", "the ", "The "))
    keys = [c.text.lower() for c in found]
    assert len(keys) == len(set(keys))


def test_the_asked_type_ranks_first_and_the_question_own_words_are_left_out():
    found = candidates(UNITS, "Who won the chess tournament held in Copenhagen?", limit=50)
    assert found[0].text == "Emanuel Lasker" and found[0].label == "PERSON"
    assert "Copenhagen" not in [c.text for c in found]  # named by the question
    when = candidates(UNITS, "When was the Christmas Meeting of 1888 won?", limit=3)
    assert when[0].label == "DATE" and when[0].text == "28 December 1888"
    many = candidates(UNITS, "How many people live in the capital of Denmark?", limit=3)
    assert "1,300,000" in [c.text for c in many]


def test_titles_are_candidates():
    found = candidates(UNITS, "Which city is the capital of Denmark?", limit=50)
    assert any(c.text == "Christmas Meeting of 1888" and c.label == "TITLE" for c in found)


def test_a_choice_question_keeps_only_the_options_it_names():
    found = candidates(UNITS, "Who won in 1888, Emanuel Lasker or Copenhagen?", limit=50)
    assert {c.text for c in found} <= {"Emanuel Lasker", "Copenhagen", "Lasker"}
    assert "Emanuel Lasker" in {c.text for c in found}


@pytest.mark.parametrize("question, yes_no", [
    ("Is Copenhagen the capital of Denmark?", True),
    ("Were Lasker and Tarrasch both chess players?", True),
    ("Is the capital Copenhagen, Denmark or Lasker?", False),  # a choice, not yes/no
    ("Who won the tournament?", False),
])
def test_yes_no_questions_get_no_span_candidates(question, yes_no):
    assert read_question(question).yes_no is yes_no
    assert (candidates(UNITS, question, limit=10) == []) is yes_no


def test_limit_and_units_holding():
    assert len(candidates(UNITS, "What happened in 1888?", limit=2)) == 2
    assert units_holding("Copenhagen", UNITS) == [0, 1]
    assert units_holding("Lasker", UNITS) == [0]


def test_a_span_is_held_only_as_whole_words():
    """A citation is true by construction only if the unit holds the span itself: "1,000"
    inside "1,000,000" or "Lyon" inside "Lyonnais" is another word (kgrag query once
    marked »1,000«,000 as the answer)."""
    units = ["It holds 1,000,000 rows.", "Batches of 1,000 documents.", "The Lyonnais hills."]
    assert units_holding("1,000", units) == [1]
    assert units_holding("Lyon", units) == []
    assert occurrence("1,000", units[0] + " " + units[1]) == (36, 41)
    assert occurrence("BATCHES", units[1], ignore_case=True) == (0, 7)
    assert occurrence("  ", units[1]) is None


def test_a_lone_letter_is_no_candidate_but_a_lone_digit_is():
    """Was: "s", a table header's unit ("| 100k build s |"), was a candidate, and the
    free answer "100k build s =" snapped to it: the answer a person read."""
    units = [("# Scale\nThe cold build took 2,814 s, about 47 minutes, on 2 cores.\n\n"
              "| step | 100k build s | rerun after adding s | share |\n|---|---|---|---|\n"
              "| dense | 956.2 | 53.0 | 5.5 % |")]
    found = [c.text for c in candidates(units, "How long did the cold build take?", None)]
    assert "s" not in found
    assert {"2,814 s", "956.2", "2"} <= set(found)


def test_the_names_of_code_a_unit_writes_are_candidates():
    """A library's documentation answers "which function …" with a name spaCy's tokens do
    not cut out ("heapq.heappushpop(heap" is one token): a free answer "median_grouped()"
    found no candidate sharing a word and the scored fallback chose the page's title."""
    units = [("# heapq\nheapq.heappushpop(heap, item) Push item on the heap, then pop and "
              "return the smallest item. See also bisect_left and textwrap.TextWrapper; "
              "call dedent(text) first, e.g. as the U.S. docs and the Ph.D. notes do."),
             "# Tom Copping\nTom Copping(born 1950) won the election.The party lost."]
    found = candidates(units, "Which heapq function pushes an item on the heap and then "
                       "pops and returns the smallest item?", None)
    texts = [c.text for c in found]
    assert {"heapq.heappushpop", "heappushpop", "bisect_left", "textwrap.TextWrapper",
            "TextWrapper", "textwrap", "dedent"} <= set(texts)
    assert not {"U.S", "Ph.D", "e.g", "Copping", "election.The"} & set(texts)
    assert found[0].label == "CODE"  # "which … function" asks for a name of code
    for candidate in found:
        assert candidate.text in units[candidate.unit]
