"""Metrics against hand-computed cases."""

from __future__ import annotations

import pytest

from kgrag.eval.metrics import (
    covers,
    exact_match,
    f1_score,
    normalize_answer,
    percentile,
    recall_at_k,
)


def test_squad_normalisation():
    assert normalize_answer("The  Pittsburgh Pirates!") == "pittsburgh pirates"
    assert normalize_answer("An apple, a pear") == "apple pear"


def test_exact_match_takes_the_best_alias():
    assert exact_match("hewlett-packard", ["Hewlett Packard", "Hewlett-Packard"]) == 1.0
    assert exact_match("HP", ["Hewlett Packard"]) == 0.0


def test_f1_by_hand():
    # pred tokens: sir francis baring; gold: sir francis baring 1st baronet
    # common 3, precision 3/3, recall 3/5 -> F1 = 2*1*0.6/1.6 = 0.75
    assert f1_score("Sir Francis Baring", ["Sir Francis Baring, 1st Baronet"]) == pytest.approx(0.75)
    assert f1_score("Francis", ["nobody", "Francis Baring"]) == pytest.approx(2 / 3)
    assert f1_score("", ["Denmark"]) == 0.0


def test_f1_is_zero_on_yes_no_mismatch():
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("no it is not", ["no"]) == 0.0
    assert f1_score("yes", ["yes"]) == 1.0


def test_coverage_matches_whole_words_after_normalisation():
    context = "# Stanley\nThe courthouse in Stanley, North Dakota was built in 1914."
    assert covers(context, ["stanley"]) == 1.0
    assert covers(context, ["North Dakota."]) == 1.0
    assert covers(context, ["191"]) == 0.0
    assert covers(context, ["Bismarck", "1914"]) == 1.0
    assert covers(context, [""]) == 0.0


def test_recall_at_k_counts_distinct_documents_in_rank_order():
    ranked = ["d1", "d1", "d2", "d3", "d4"]
    assert recall_at_k(ranked, ["d2", "d4"], 2) == 0.5
    assert recall_at_k(ranked, ["d2", "d4"], 4) == 1.0
    assert recall_at_k(ranked, [], 5) is None


def test_percentile():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(101)), 95) == 95.0
