"""The kgqa importer on the real WebQSP sample and on malformed lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag.corpus import load_corpus
from kgrag.corpus.importers.kgqa import triple_id
from kgrag.errors import KgragError


def load(base_dir: Path, path: str | Path, **options):
    cfg = {"dataset": "kgqa", "path": str(path), "limit": None, "questions": None}
    return load_corpus({**cfg, **options}, base_dir)


def test_the_graph_is_every_line_s_gold_triples_whatever_is_selected(data_dir: Path):
    lines = [json.loads(x) for x in (data_dir / "kgqa_webqsp.jsonl").read_text().splitlines()]
    every = {tuple(t) for line in lines for t in line["gold_triples"]}
    corpus = load(data_dir, "kgqa_webqsp.jsonl", limit=20)
    assert corpus.kg.height == corpus.documents.height == len(every)
    assert set(zip(corpus.kg["head"], corpus.kg["relation"], corpus.kg["tail"])) == every
    assert corpus.questions.height == 20
    first = corpus.questions.row(0, named=True)
    assert first["question_id"] == lines[0]["id"] and first["answers"] == lines[0]["answers"]
    assert first["supporting_doc_ids"] == [triple_id(tuple(t)) for t in lines[0]["gold_triples"]]
    assert set(corpus.topics.filter(corpus.topics["question_id"] == lines[0]["id"])["entity"]) \
        == set(lines[0]["topic_entities"])
    assert corpus.triples.filter(corpus.triples["question_id"] == lines[0]["id"]).height == len(
        lines[0]["gold_triples"])


def test_questions_whose_answers_are_all_null_are_skipped(data_dir: Path, caplog):
    corpus = load(data_dir, "kgqa_webqsp.jsonl")
    assert corpus.questions.height == 1411 - 37
    assert "WebQTest-31" not in set(corpus.questions["question_id"])
    assert "37 questions have no named answer" in caplog.text


@pytest.mark.parametrize(("line", "message"), [
    ({"id": "x", "question": "?", "answers": ["A"], "topic_entities": ["A"],
      "gold_triples": [["A", "r"]]}, "'gold_triples' entries must be"),
    ({"id": "x", "question": "?", "answers": ["A"], "topic_entities": ["A"],
      "gold_triples": [["A", "", "B"]]}, "three non-empty strings"),
    ({"id": "x", "question": "?", "answers": [3], "topic_entities": ["A"],
      "gold_triples": []}, "'answers' must be a list of strings"),
    ({"id": "x", "question": "?", "answers": ["A"], "gold_triples": []},
     "missing field 'topic_entities'"),
])
def test_a_malformed_line_is_named(tmp_path: Path, line: dict, message: str):
    good = {"id": "ok", "question": "?", "answers": ["B"], "topic_entities": ["A"],
            "gold_triples": [["A", "r", "B"]]}
    path = tmp_path / "kg.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(KgragError, match=rf"kg.jsonl:2: .*{message}"):
        load(tmp_path, path)
