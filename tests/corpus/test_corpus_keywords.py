"""Keywords: stop words, punctuation and bare numbers go; case, hyphens and acronyms stay."""

from __future__ import annotations

import numpy as np

from kgrag.corpus.keywords import STOP_WORDS, keyword_matrix, keywords


def test_stop_words_and_punctuation_are_dropped_and_case_is_kept():
    text = "The Eiffel Tower is in Paris, and the tower is very tall!"
    assert keywords(text) == ["Eiffel", "Tower", "Paris", "tower", "tall"]


def test_repeats_are_kept_in_order():
    assert keywords("Paris, Paris and London") == ["Paris", "Paris", "London"]


def test_hyphens_apostrophes_and_possessives():
    text = "Jean-Paul's co-op near O’Brien's house; Tolkien’s books"
    assert keywords(text) == ["Jean-Paul", "co-op", "O'Brien", "house", "Tolkien", "books"]


def test_bare_numbers_and_single_characters_are_dropped_but_mixed_words_kept():
    text = "In 1888 the F-16 and COVID-19 of the 1960s cost 3.5 units (a) J. Smith"
    assert keywords(text) == ["F-16", "COVID-19", "1960s", "cost", "units", "Smith"]


def test_acronyms_and_capitalised_may_and_will_are_not_stop_words():
    text = "The US told us that WHO may act. Born in May, Will said it will rain."
    assert keywords(text) == ["US", "told", "WHO", "act", "Born", "May", "Will", "said", "rain"]


def test_lower_applies_after_the_stop_word_rules():
    text = "The US told us that WHO may act. Born in May, Will said it will rain."
    assert keywords(text, lower=True) == [
        "us", "told", "who", "act", "born", "may", "will", "said", "rain"]
    matrix, vocabulary = keyword_matrix(["Paris and paris", "PARIS"], lower=True)
    assert vocabulary == ["paris"]
    np.testing.assert_array_equal(matrix.toarray(), [[1], [1]])


def test_underscores_separate_words():
    assert keywords("snake_case_name") == ["snake", "case", "name"]


def test_stop_word_list_is_lowercase_and_has_the_usual_suspects():
    assert all(word == word.lower() for word in STOP_WORDS)
    assert {"the", "a", "is", "of", "and", "which", "would"} <= STOP_WORDS


def test_keyword_matrix_is_binary_with_a_sorted_vocabulary():
    matrix, vocabulary = keyword_matrix(["Paris and Paris", "London, Paris", "", "the of"])
    assert vocabulary == ["London", "Paris"]
    np.testing.assert_array_equal(matrix.toarray(), [[0, 1], [1, 1], [0, 0], [0, 0]])
    assert matrix.dtype == np.int32


def test_keyword_matrix_product_counts_shared_keywords():
    matrix, _ = keyword_matrix(["red green blue", "green blue cyan", "cyan magenta"])
    np.testing.assert_array_equal((matrix @ matrix.T).toarray(),
                                  [[3, 2, 0], [2, 3, 1], [0, 1, 2]])


def test_keyword_matrix_of_nothing():
    matrix, vocabulary = keyword_matrix([])
    assert matrix.shape == (0, 0) and vocabulary == []
