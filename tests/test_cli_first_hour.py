"""A newcomer's first hour, as the README's first lines tell it: ``kgrag init`` on a
folder of the repository's own docs, ``kgrag run`` on the spec exactly as written
(OpenVINO int8 embedder, spaCy graph), ``kgrag query`` with its cited answer (the
stand-in LLM answers: Gemma would take minutes), ``kgrag graph`` of the entity graph
with each chunk's file and heading; then questions added, the spec written again and
evaluated, and ``kgrag gc`` removing what the first index left behind."""

from __future__ import annotations

import json
import shutil

import networkx as nx

from kgrag import api
from kgrag.cli import main
from tests.conftest import REPO, make_project
from tests.standin import RuleLLM, open_with, run_with

QUESTIONS = [
    {"id": "pdf", "question": "Which library reads the text layer of a PDF?",
     "answers": ["pypdf"], "supporting": ["documents.md"]},
    {"id": "lock", "question": "Which tool makes the lock file?", "answers": ["pip-tools"]},
]


def test_init_run_query_graph_then_questions_and_gc(tmp_path, monkeypatch, capsys):
    project = make_project(tmp_path / "checkout")
    docs = project / "my-docs"
    docs.mkdir()
    for page in sorted((REPO / "docs").glob("*.md")):
        shutil.copy(page, docs / page.name)
    monkeypatch.chdir(project)

    assert main(["init", "my-docs", "-o", "first.yaml"]) == 0
    assert "no questions file" in capsys.readouterr().out
    assert main(["run", "first.yaml"]) == 0
    out = capsys.readouterr().out
    assert "extract.entities" in out and f"outputs: {project / 'outputs' / 'my-docs'}" in out
    built = api.open_session("first.yaml").plan
    assert "evaluate" not in built.by_name()  # nothing to evaluate without questions

    session = open_with(project / "first.yaml", RuleLLM())
    with monkeypatch.context() as patched:  # the stand-in answers, not Gemma
        patched.setattr(api, "open_session", lambda path: session)
        assert main(["query", "first.yaml", QUESTIONS[0]["question"]]) == 0
    out = capsys.readouterr().out
    assert "strategy: dense" in out and ".md, § " in out  # each unit's file and heading
    answer = next(line for line in out.splitlines() if line.startswith("answer: "))
    assert answer.endswith("]"), answer  # an extractive answer cites the units holding it
    assert "»" in out.split(answer, 1)[1]  # the span marked in its cited passage

    assert main(["graph", "first.yaml", "-o", "graph.graphml"]) == 0
    graph = nx.read_graphml(project / "graph.graphml")
    chunks = [data for _, data in graph.nodes(data=True) if data["kind"] == "chunk"]
    assert chunks and all(c["file"].endswith(".md") and c["heading"] for c in chunks)
    assert {c["file"] for c in chunks} == {p.name for p in docs.iterdir()}

    (project / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    assert main(["init", "my-docs", "-o", "first.yaml"]) == 2  # kept without --force
    capsys.readouterr()
    assert main(["init", "my-docs", "-o", "first.yaml", "--force"]) == 0
    assert "questions from" in capsys.readouterr().out
    steps, rows, _ = run_with(project / "first.yaml", RuleLLM())
    assert set(rows) == {"dense", "bm25", "fusion", "ppr"}
    assert all(row["n_answered"] == 2 and row["cited"] == 1.0 for row in rows.values())
    assert max(row["recall@5"] for row in rows.values()) == 1.0
    # the questions joined the corpus's fingerprint: the first index is superseded, and
    # the new one was built from the cache (spaCy parses and vectors)
    assert steps["dense"]["embed"]["calls"] == 0
    first_index = {steps[n]["artefact"].rsplit("-", 1)[0]
                   for n in ("corpus", "chunks", "extract.entities", "dense")}
    assert main(["gc", "first.yaml"]) == 0
    out = capsys.readouterr().out
    assert "removed 4 folder(s)" in out
    assert all(name in out for name in first_index)
