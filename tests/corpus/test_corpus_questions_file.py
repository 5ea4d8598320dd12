"""Your own questions for a jsonl or text corpus (``corpus.questions_file``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kgrag.corpus import Corpus, load_corpus
from kgrag.errors import KgragError

DOCUMENTS = [
    {"id": "paris", "title": "Paris", "text": "Paris is the capital of France."},
    {"id": 7, "text": "Lyon lies on the Rhone."},
    {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany."},
]
QUESTIONS = [
    {"id": "q1", "question": "What is the capital of France?", "answers": ["Paris", " ", "Paris"],
     "supporting": ["paris"]},
    {"id": 2, "question": "Which river flows through Lyon?", "answers": ["Rhone", "the Rhône"],
     "supporting": ["7"]},
    {"id": "q3", "question": "Which city is the largest?", "answers": ["Berlin"]},
]


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n"
                            for row in rows))
    return path


def load(base: Path, dataset: str, path: str, **options: Any) -> Corpus:
    cfg = {"dataset": dataset, "path": path, "limit": None, "questions": None, "fields": {}}
    return load_corpus({**cfg, **options}, base)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    write_lines(tmp_path / "docs.jsonl", DOCUMENTS)
    write_lines(tmp_path / "questions.jsonl", QUESTIONS)
    return tmp_path


def test_jsonl_questions_name_their_supporting_documents_by_id(base):
    corpus = load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl")
    doc_of = dict(zip(corpus.documents["title"], corpus.documents["doc_id"]))
    rows = corpus.questions.to_dicts()
    assert [r["question_id"] for r in rows] == ["q1", "2", "q3"]
    assert [r["answers"] for r in rows] == [["Paris"], ["Rhone", "the Rhône"], ["Berlin"]]
    # an integer id in either file is its decimal text; a line without a title is titled by it
    assert [r["supporting_doc_ids"] for r in rows] == [[doc_of["Paris"]], [doc_of["7"]], []]
    assert all(r["gold_sentence_ids"] == [] for r in rows)


def test_a_text_folder_names_documents_by_their_relative_path(tmp_path):
    (tmp_path / "notes" / "cities").mkdir(parents=True)
    (tmp_path / "notes" / "cities" / "paris.md").write_text("Paris is in France.\n")
    (tmp_path / "notes" / "rome.txt").write_text("Rome is in Italy.\n")
    write_lines(tmp_path / "q.jsonl", [
        {"id": "a", "question": "Where is Rome?", "answers": ["Italy"],
         "supporting": ["rome.txt", "cities/paris.md"]}])
    corpus = load(tmp_path, "text", "notes", questions_file=str(tmp_path / "q.jsonl"))
    doc_of = dict(zip(corpus.documents["title"], corpus.documents["doc_id"]))
    assert corpus.questions["supporting_doc_ids"].to_list() == [
        [doc_of["rome.txt"], doc_of["cities/paris.md"]]]


def test_corpus_questions_picks_from_the_questions_file_and_limit_counts_documents(base):
    corpus = load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl",
                  questions=["q3", "q1"], limit=2)
    assert corpus.questions["question_id"].to_list() == ["q1", "q3"]
    assert corpus.documents.height == 2
    every = load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl", limit=2)
    assert every.questions.height == 3  # the limit cuts documents, never questions


def test_without_a_questions_file_a_plain_corpus_has_no_questions(base):
    assert load(base, "jsonl", "docs.jsonl").questions.is_empty()
    with pytest.raises(KgragError, match="remove corpus.questions or name your questions in "
                                         "corpus.questions_file"):
        load(base, "jsonl", "docs.jsonl", questions=["q1"])


@pytest.mark.parametrize("row, problem", [
    ({"question": "Who?", "answers": ["x"]}, ":2: missing field 'id'"),
    ({"id": True, "question": "Who?", "answers": ["x"]},
     ":2: field 'id' must be a string or an integer"),
    ({"id": "b", "answers": ["x"]}, ":2: missing field 'question'"),
    ({"id": "b", "question": " ", "answers": ["x"]}, ":2: field 'question' is empty"),
    ({"id": "b", "question": "Who?"}, ":2: missing field 'answers'"),
    ({"id": "b", "question": "Who?", "answers": "x"}, ":2: field 'answers' must be a list"),
    ({"id": "b", "question": "Who?", "answers": [" "]},
     ":2: field 'answers' needs at least one non-empty answer"),
    ({"id": "b", "question": "Who?", "answers": ["x"], "supporting": ["rome"]},
     ":2: supporting: no document has the id 'rome' (a document's id is its field 'id')"),
    ({"id": "b", "question": "Who?", "answers": ["x"], "supporting": "paris"},
     ":2: field 'supporting' must be a list"),
    ({"id": "q1", "question": "Who?", "answers": ["x"]},
     ":2: duplicate question id 'q1' (first on line 1)"),
    ("{not json", ":2: not valid JSON"),
])
def test_a_bad_row_gets_one_message_with_its_line(base, row, problem):
    write_lines(base / "bad.jsonl", [QUESTIONS[0], row])
    with pytest.raises(KgragError) as caught:
        load(base, "jsonl", "docs.jsonl", questions_file="bad.jsonl", missing_support="error")
    assert str(caught.value).startswith(f"{base / 'bad.jsonl'}{problem}")


def test_a_supporting_id_that_names_two_documents_is_refused(base):
    write_lines(base / "docs.jsonl", [*DOCUMENTS, {"id": "paris", "text": "Paris, Texas."}])
    with pytest.raises(KgragError, match=r":1: supporting: 2 documents have the id 'paris'"):
        load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl")


def test_a_document_cut_by_limit_is_named_as_the_reason(base):
    write_lines(base / "questions.jsonl", [
        {"id": "q9", "question": "?", "answers": ["x"], "supporting": ["berlin"]}])
    load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl")
    with pytest.raises(KgragError, match=r":1: supporting: no document has the id 'berlin' "
                                         r".*; corpus.limit keeps the first 2 documents\)"):
        load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl", limit=2,
             missing_support="error")


def test_a_question_naming_a_removed_document_is_skipped_and_named(base, caplog):
    write_lines(base / "questions.jsonl", [
        *QUESTIONS, {"id": "q4", "question": "Where is Rome?", "answers": ["Italy"],
                     "supporting": ["paris", "rome"]}])
    with caplog.at_level(logging.WARNING):
        corpus = load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl")
    assert corpus.questions["question_id"].to_list() == ["q1", "2", "q3"]
    assert corpus.questions_missing_support == ("q4",)
    assert "skipped 1 of 4 questions naming a supporting document the corpus lacks " \
           "(corpus.missing_support: skip): q4 ('rome')" in caplog.text
    picked = load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl",
                  questions=["q1"])  # a question not picked is not skipped either
    assert picked.questions_missing_support == ()


def test_when_every_question_lacks_its_documents_the_run_stops(base):
    write_lines(base / "questions.jsonl", [
        {"id": "q9", "question": "?", "answers": ["x"], "supporting": ["berlin"]}])
    with pytest.raises(KgragError, match=r"every question names a supporting document the "
                                         r"corpus lacks: q9 \('berlin'\)"):
        load(base, "jsonl", "docs.jsonl", questions_file="questions.jsonl", limit=2)
