"""KGQA answer metrics as SubgraphRAG's evaluation defines them, on hand-counted replies."""

from __future__ import annotations

import polars as pl
import pytest

from kgrag.eval.metrics import AnswerCounts, answer_coverage, answer_lines, hit, micro_f1
from kgrag.eval.registry import StrategyRun, score_strategy

REPLY = "ans: the 2010 World Series\nsome reasoning\nans: Boston Red Sox\nans: 2012 World Series"
GOLD = ["2010 World Series", "2012 World Series", "2014 World Series"]


def test_answer_lines_are_the_lines_holding_ans():
    assert answer_lines(REPLY) == ["the 2010 World Series", "Boston Red Sox", "2012 World Series"]
    assert answer_lines("I think it is Boston") == []


def test_hit_and_hit_at_one():
    predictions = answer_lines(REPLY)
    assert hit(predictions, GOLD) == 1.0
    assert hit(predictions, GOLD, 1) == 1.0  # "the 2010 World Series" holds a gold answer
    assert hit(predictions[1:], GOLD, 1) == 0.0
    assert hit([], GOLD) == 0.0


def test_per_question_f1_counts_predictions_and_recalled_answers():
    counts = AnswerCounts.of(answer_lines(REPLY), GOLD)
    assert (counts.correct, counts.predicted, counts.recalled, counts.gold) == (2, 3, 2, 3)
    assert counts.f1() == pytest.approx(2 / 3)
    assert AnswerCounts.of([], GOLD).f1() == 0.0


def test_micro_f1_sums_the_counts_before_dividing():
    one = AnswerCounts.of(["Paris"], ["Paris"])  # P 1, R 1
    other = AnswerCounts.of(["Rome", "Oslo", "Bern"], ["Lima", "Kyiv", "Doha", "Baku"])  # nothing right
    precision, recall = 1 / 4, 1 / 5
    assert micro_f1([one, other]) == pytest.approx(2 * precision * recall / (precision + recall))
    assert (one.f1() + other.f1()) / 2 == 0.5  # Macro-F1 differs


def test_registered_metrics_read_the_answered_pairs():
    run = StrategyRun(pl.DataFrame({"context": ["(A, r, 2010 World Series)"],
                                    "answers": [GOLD]}), [(REPLY, GOLD)], None)
    assert score_strategy("hit", run) == 1.0
    assert score_strategy("hit@1", run) == 1.0
    assert score_strategy("macro_f1", run) == pytest.approx(0.6667, abs=1e-4)
    assert score_strategy("micro_f1", run) == pytest.approx(0.6667, abs=1e-4)
    assert score_strategy("answer_coverage", run) == pytest.approx(0.3333, abs=1e-4)
    assert answer_coverage("nothing here", GOLD) == 0.0
