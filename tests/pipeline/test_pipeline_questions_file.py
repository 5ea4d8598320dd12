"""A jsonl corpus evaluated on the user's own questions, and one with none that still
builds and answers ``kgrag query``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with, run_with

DOCUMENTS = [
    {"id": "louvre", "title": "Louvre", "text": "The Louvre is a museum in Paris, France."},
    {"id": "prado", "title": "Prado", "text": "The Prado is a museum in Madrid, Spain."},
    {"id": "uffizi", "title": "Uffizi", "text": "The Uffizi is a gallery in Florence, Italy."},
]
QUESTIONS = [
    {"id": "q1", "question": "In which city is the Louvre?", "answers": ["Paris"],
     "supporting": ["louvre"]},
    {"id": "q2", "question": "In which country is the Prado?", "answers": ["Spain"],
     "supporting": ["prado"]},
]


def corpus_spec(project: Path, questions: list[dict] | None, **sections) -> Path:
    (project / "museums.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS))
    corpus = {"dataset": "jsonl", "path": "../museums.jsonl"}
    if questions is not None:
        (project / "questions.jsonl").write_text("".join(json.dumps(q) + "\n"
                                                         for q in questions))
        corpus["questions_file"] = "../questions.jsonl"
    return write_spec(project, corpus=corpus, query=[{"name": "dense", "strategy": "naive",
                                                      "budget_tokens": 40}], **sections)


def test_a_questions_file_turns_on_evaluation(project):
    spec = corpus_spec(project, QUESTIONS, evaluate={"metrics": ["em", "coverage", "recall@1"]})
    steps, rows, _ = run_with(spec, RuleLLM())
    assert {"answer.dense", "evaluate"} <= set(steps)
    metrics = json.loads((project / "outputs" / "tiny" / "metrics.json").read_text())
    assert (metrics["dataset"], metrics["n_questions"]) == ("jsonl", 2)
    row = rows["dense"]
    assert row["n_answered"] == 2 and row["em"] == 0.0  # the stand-in never says "Paris"
    assert row["coverage"] == 1.0 and row["recall@1"] == 1.0  # one short museum per unit


def test_recall_without_supporting_documents_says_it_is_not_reported(project, caplog):
    questions = [{k: v for k, v in q.items() if k != "supporting"} for q in QUESTIONS]
    spec = corpus_spec(project, questions, answer={"questions": 0},
                       evaluate={"metrics": ["coverage", "recall@2"]})
    with caplog.at_level(logging.WARNING):
        steps, rows, _ = run_with(spec, RuleLLM())
    assert rows["dense"]["recall@2"] is None and rows["dense"]["coverage"] == 1.0
    note = "not reported: no question has supporting documents"
    assert note in steps["evaluate"]["notes"]["recall@2"]
    assert f"recall@2: {note}" in caplog.text


def test_recall_over_some_questions_says_over_how_many(project):
    questions = [QUESTIONS[0], {k: v for k, v in QUESTIONS[1].items() if k != "supporting"}]
    spec = corpus_spec(project, questions, answer={"questions": 0},
                       evaluate={"metrics": ["recall@1"]})
    steps, rows, _ = run_with(spec, RuleLLM())
    assert rows["dense"]["recall@1"] == 1.0
    assert steps["evaluate"]["notes"]["recall@1"] == ("the mean over the 1 of 2 questions with "
                                                      "supporting documents")


def test_a_corpus_without_questions_builds_and_answers_a_query(project, monkeypatch, capsys):
    spec = corpus_spec(project, None)
    session = open_with(spec, RuleLLM())
    assert [step.name for step in session.plan.steps] == ["corpus", "chunks", "dense"]
    monkeypatch.setattr(api, "open_session", lambda path: session)
    assert main(["query", str(spec), "Where is the Prado?"]) == 0
    out = capsys.readouterr().out
    assert "Prado" in out.splitlines()[1] and "answer: An answer from the evidence" in out


def test_the_questions_file_is_part_of_the_corpus_fingerprint(project):
    spec = corpus_spec(project, QUESTIONS)
    first = api.open_session(spec).plan.by_name()["corpus"]
    assert "questions_file" not in first.config and len(first.config["questions_sha256"]) == 64
    corpus_spec(project, QUESTIONS[:1])
    assert api.open_session(spec).plan.by_name()["corpus"].fingerprint != first.fingerprint
    without = api.open_session(corpus_spec(project, None)).plan.by_name()["corpus"]
    assert "questions_sha256" not in without.config


@pytest.mark.parametrize("corpus, message", [
    ({"dataset": "musique", "path": "../corpus.jsonl", "questions_file": "../q.jsonl"},
     ("corpus.questions_file: only datasets jsonl, text and documents take a questions file; "
     "musique "
     "brings its own questions")),
    ({"dataset": "jsonl", "path": "../corpus.jsonl", "questions_file": "../nothing.jsonl"},
     "corpus.questions_file does not exist: "),
    ({"dataset": "jsonl", "path": "../corpus.jsonl", "missing_support": "error"},
     ("corpus.missing_support: says what to do with a questions_file's supporting ids that "
      "no document has; name corpus.questions_file or remove it")),
])
def test_a_misplaced_or_missing_questions_file_exits_2(project, capsys, corpus, message):
    spec = write_spec(project, corpus=corpus)
    code = main(["run", str(spec), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.splitlines()) == 1
