"""``kgrag init``: the dataset shape found from a path, a commented spec that validates
and compiles for every shape, questions found beside or inside a folder, and a file
never overwritten without --force."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.corpus.detect import detect
from kgrag.spec import load_spec
from tests.conftest import SHARED_DATA, make_project

QUESTION = {"id": "q1", "question": "Where is the Louvre?", "answers": ["Paris"],
            "supporting": ["louvre.md"]}


@pytest.fixture
def museums(project: Path) -> Path:
    folder = project / "museums"
    folder.mkdir()
    (folder / "louvre.md").write_text("# Louvre\n\nThe Louvre is a museum in Paris.\n")
    (folder / "prado.md").write_text("# Prado\n\nThe Prado is a museum in Madrid.\n")
    return folder


def init(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["init", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("source, dataset, steps", [
    ("musique_200.jsonl", "musique", {"extract.entities", "answer.ppr", "evaluate"}),
    ("2wiki_200.jsonl", "2wiki", {"extract.entities", "answer.fusion", "evaluate"}),
    ("hotpotqa_200.jsonl", "hotpotqa", {"extract.entities", "answer.bm25", "evaluate"}),
    ("kgqa_webqsp.jsonl", "kgqa", {"kg", "answer.cosine", "evaluate"}),
    ("holisqa/business", "holisqa", {"extract.entities", "answer.dense", "evaluate"}),
])
def test_a_benchmark_gets_a_spec_that_validates_and_compiles(tmp_path, capsys, source,
                                                             dataset, steps):
    project = make_project(tmp_path / "proj")
    spec = project / "specs" / "first.yaml"
    code, out, _ = init(capsys, SHARED_DATA / source, "-o", spec)
    assert code == 0 and f"dataset {dataset}, its own questions" in out
    lines = spec.read_text().splitlines()
    for key in ("name:", "corpus:", "models:", "query:", "answer:", "evaluate:"):
        at = next(i for i, line in enumerate(lines) if line.startswith(key))
        assert lines[at - 1].startswith("#"), f"{key} has no comment above it"
    written = load_spec(spec).corpus["path"]
    assert not written.startswith("/") and load_spec(spec).resolve(written) == (
        SHARED_DATA / source).resolve()
    session = api.open_session(spec)
    assert steps <= set(session.plan.by_name())
    assert session.spec.models["embedder"]["backend"] == "openvino-int8"
    assert session.spec.answer["questions"] == 30  # more questions than a first run answers
    if dataset not in ("kgqa", "holisqa"):
        assert dict(session.spec.answer).items() >= {"mode": "extractive", "cite": True}.items()
        assert list(session.spec.evaluate["metrics"]) == [
            "em", "f1", "coverage", "recall@5", "cited", "citation_precision",
            "citation_precision_answer"]


def test_a_documents_folder_with_questions_beside_it(museums, capsys):
    (museums.parent / "questions.jsonl").write_text(json.dumps(QUESTION) + "\n")
    spec = museums.parent / "specs" / "museums.yaml"
    code, out, _ = init(capsys, museums, "-o", spec)
    assert code == 0 and f"questions from {museums.parent / 'questions.jsonl'}" in out
    loaded = load_spec(spec)
    assert dict(loaded.corpus).items() >= {"dataset": "documents", "path": "../museums",
                                           "questions_file": "../questions.jsonl"}.items()
    assert "evaluate:" in spec.read_text().replace("# evaluate:", "")
    assert "evaluate" in api.open_session(spec).plan.by_name()


def test_a_questions_file_inside_the_folder_counts_and_one_that_is_not_is_left_out(museums):
    (museums / "questions.jsonl").write_text(json.dumps(QUESTION) + "\n")
    assert detect(museums).questions_file == museums / "questions.jsonl"
    (museums / "questions.jsonl").write_text('{"id": "louvre", "text": "not a question"}\n')
    found = detect(museums)
    assert found.questions_file is None and "left out" in found.notes[0]


def test_without_questions_nothing_is_evaluated_until_the_user_adds_them(museums, capsys):
    spec = museums.parent / "specs" / "museums.yaml"
    code, out, _ = init(capsys, museums, "-o", spec)
    assert code == 0 and "no questions file" in out
    text = spec.read_text()
    assert "\n# evaluate:\n#   metrics: [em, f1" in text and "\nevaluate:" not in text
    plan = api.open_session(spec).plan
    assert "evaluate" not in plan.by_name() and set(plan.queries) == {
        "dense", "bm25", "fusion", "ppr"}
    uncommented = text.replace("\n# evaluate:\n#   metrics:", "\nevaluate:\n  metrics:")
    (museums.parent / "questions.jsonl").write_text(json.dumps(QUESTION) + "\n")
    spec.write_text(uncommented.replace('path: "../museums"}', 'path: "../museums", '
                                        'questions_file: "../questions.jsonl"}'))
    assert "evaluate" in api.open_session(spec).plan.by_name()  # as its comment says


def test_one_document_per_line_with_its_own_field_names(tmp_path, capsys):
    project = make_project(tmp_path / "proj")
    (project / "notes.jsonl").write_text(
        json.dumps({"_id": "a", "body": "Alpha is the first letter."}) + "\n")
    code, _, _ = init(capsys, project / "notes.jsonl", "-o", project / "notes.yaml")
    assert code == 0
    fields = load_spec(project / "notes.yaml").corpus["fields"]
    assert (fields["text"], fields["id"]) == ("body", "_id")
    (project / "bare.jsonl").write_text(json.dumps({"body": "no id, no title"}) + "\n")
    code, _, err = init(capsys, project / "bare.jsonl", "-o", project / "bare.yaml")
    assert code == 2 and "needs an id or a title field" in err


def test_an_existing_file_is_kept_unless_forced(museums, capsys):
    spec = museums.parent / "first.yaml"
    spec.write_text("mine\n")
    code, out, err = init(capsys, museums, "-o", spec)
    assert (code, out) == (2, "")
    assert err == f"kgrag: error: {spec} exists; pass --force to overwrite it\n"
    assert spec.read_text() == "mine\n"
    assert init(capsys, museums, "-o", spec, "--force")[0] == 0
    assert spec.read_text().startswith("# A first spec for the documents in museums")


def test_the_default_name_follows_the_corpus_and_the_folder_is_no_place_for_it(
        museums, capsys, monkeypatch):
    monkeypatch.chdir(museums.parent)
    assert init(capsys, "museums")[0] == 0
    assert load_spec(museums.parent / "museums.yaml").name == "museums"
    monkeypatch.chdir(museums)
    code, _, err = init(capsys, ".")
    assert code == 2 and "write the spec outside" in err
    assert not (museums / "museums.yaml").exists()


@pytest.mark.parametrize("line, message", [
    ('{"id": "x"}', "no string field to read"),
    ("[1, 2]", "expected a JSON object per line"),
    ("not json", "not a JSON object"),
])
def test_a_file_of_no_known_shape_is_one_error(tmp_path, capsys, line, message):
    (tmp_path / "odd.jsonl").write_text(line + "\n")
    code, _, err = init(capsys, tmp_path / "odd.jsonl", "-o", tmp_path / "odd.yaml")
    assert code == 2 and message in err and len(err.splitlines()) == 1


def test_a_holisqa_folder_is_not_a_documents_folder(tmp_path):
    domain = tmp_path / "domain"
    domain.mkdir()
    for name in ("sentences.jsonl", "qa.jsonl"):
        with open(SHARED_DATA / "holisqa" / "business" / name) as handle:
            (domain / name).write_text(handle.readline())
    assert detect(domain).dataset == "holisqa"
    (domain / "qa.jsonl").unlink()
    assert detect(domain).dataset == "documents"
