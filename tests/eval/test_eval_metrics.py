"""Metrics against hand-computed cases."""

from __future__ import annotations

import polars as pl
import pytest

from kgrag.answer.matching import exact_match, f1_score, normalize_answer
from kgrag.errors import KgragError
from kgrag.eval.metrics import (
    context_recall,
    covers,
    percentile,
    recall_at_k,
)
from kgrag.eval.registry import EvidenceSpans
from kgrag.eval.report import format_table, strategy_row


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


def test_context_recall_uses_the_union_of_retrieved_spans():
    chunks = [("d1", 0, 60), ("d1", 50, 120), ("d2", 0, 100)]
    split = ("d1", 40, 90)  # no chunk holds it whole, the two overlapping ones together do
    assert context_recall(chunks, [split]) == 1.0
    assert context_recall([("d1", 0, 60), ("d1", 60, 120)], [split]) == 1.0  # touching
    partly = ("d1", 100, 150)  # runs past the last retrieved character
    assert context_recall(chunks, [partly]) == 0.0
    elsewhere = ("d3", 0, 10)  # d2's span covers the offsets, but in another document
    assert context_recall(chunks, [elsewhere]) == 0.0
    assert context_recall([("d1", 0, 60), ("d1", 70, 120)], [split]) == 0.0  # a gap at 60..70
    assert context_recall(chunks, [split, partly, elsewhere, ("d2", 10, 20)]) == 0.5
    assert context_recall([], [split]) == 0.0
    assert context_recall(chunks, []) is None


def test_context_recall_in_the_strategy_row():
    questions = pl.DataFrame({"question_id": ["q1", "q2", "q3"], "question": ["?", "?", "?"],
                              "answers": [["gold"], ["b"], ["c"]],
                              "supporting_doc_ids": [["d1"], ["d1"], []],
                              "gold_sentence_ids": [["s1", "s2"], ["s2"], []]})
    retrieved = pl.DataFrame({"question_id": ["q1", "q2", "q3"],
                              "unit_ids": [["c1", "c1/0"], ["c2"], ["c1"]],
                              "doc_ids": [["d1", "d1"], ["d1"], ["d1"]],
                              "context": ["the gold", "", ""], "context_tokens": [3, 4, 5],
                              "retrieval_ms": [1.0, 2.0, 3.0], "llm_ms": [5.0, 7.0, 0.0], "llm_calls": [1, 1, 0],
                              "llm_tokens_in": [10, 10, 0], "llm_tokens_out": [2, 2, 0]})
    spans = EvidenceSpans(chunks={"c1": ("d1", 0, 50), "c2": ("d1", 30, 100)},
                          sentences={"s1": ("d1", 0, 30), "s2": ("d1", 31, 70)})
    row = strategy_row("text", "naive", ["coverage", "context_recall"], questions, retrieved,
                       None, spans)
    assert row["context_recall"] == 0.75  # q1: 1 of 2 (the sub-chunk id is ignored), q2: 1
    assert row["coverage"] == 0.3333  # means are rounded to 4 places
    # retrieval's own LLM requests (HugRAG's filter) count with no answers at all
    assert row["llm_calls"] == 2 and row["llm_calls_per_query"] == 0.667
    assert row["llm_tokens_in"] == 20 and row["llm_tokens_out"] == 4
    assert list(format_table([row]).split()[:3]) == ["strategy", "coverage", "context_recall"]
    no_gold = questions.with_columns(gold_sentence_ids=pl.lit([], dtype=pl.List(pl.String)))
    assert strategy_row("t", "naive", ["context_recall"], no_gold, retrieved, None,
                        spans)["context_recall"] is None
    stale = EvidenceSpans(chunks=spans.chunks, sentences={"s1": ("d1", 0, 30)})
    with pytest.raises(KgragError, match="s2 are in questions.parquet but not in sentences"):
        strategy_row("t", "naive", ["context_recall"], questions, retrieved, None, stale)


def test_percentile():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(101)), 95) == 95.0
