"""The metric registry: the names a spec may write are the registered ones, and a new
metric is one registered function."""

from __future__ import annotations

import re

import polars as pl
import pytest

from kgrag.answer.matching import normalize_answer
from kgrag.eval.registry import METRICS, StrategyRun, lookup, metric
from kgrag.eval.report import strategy_row
from kgrag.spec.schema import SCHEMA


def schema_names() -> list[str]:
    """The alternatives of the schema's ``evaluate.metrics`` pattern, a family with a
    cut-off (``recall@[1-9][0-9]{0,3}``) by its name up to the ``@``."""
    pattern = SCHEMA["$defs"]["evaluate"]["properties"]["metrics"]["items"]["pattern"]
    alternatives = re.fullmatch(r"\^\((.*)\)\$", pattern).group(1).split("|")
    return sorted(a.partition("@")[0] + a.partition("@")[1] for a in alternatives)


def test_the_schema_names_the_registered_metrics() -> None:
    assert schema_names() == sorted(METRICS)


def test_a_family_takes_its_cut_off_from_the_name() -> None:
    assert lookup("recall@12") == (METRICS["recall@"], 12)
    assert lookup("f1") == (METRICS["f1"], None)
    assert [name for name, m in METRICS.items() if m.per_build] == ["extraction"]


def test_a_new_metric_is_one_registered_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kgrag.eval.registry.METRICS", dict(METRICS))

    @metric("hit", "answers")
    def hit(run: StrategyRun) -> float | None:
        """Whether a gold answer occurs in the answer (ReG's Hit)."""
        values = [any(normalize_answer(g) in normalize_answer(a) for g in golds)
                  for a, golds in run.answered]
        return sum(values) / len(values) if values else None

    questions = pl.DataFrame({"question_id": ["q1", "q2"], "answers": [["Paris"], ["Rome"]]})
    retrieved = pl.DataFrame({"question_id": ["q1", "q2"], "context": ["", ""],
                              "context_tokens": [1, 1], "retrieval_ms": [1.0, 1.0],
                              "llm_ms": [0.0, 0.0], "llm_calls": [0, 0],
                              "llm_tokens_in": [0, 0], "llm_tokens_out": [0, 0]})
    answers = pl.DataFrame({"question_id": ["q1", "q2"], "answer": ["It is Paris.", "Milan"],
                            "tokens_in": [1, 1], "tokens_out": [1, 1]})
    row = strategy_row("t", "naive", ["hit", "em"], questions, retrieved, answers)
    assert row["hit"] == 0.5 and row["em"] == 0.0
