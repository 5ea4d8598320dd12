"""KET-RAG end to end on real data: the skeleton with the real bundled LLM (one core
chunk, so it stays under a minute), the bipartite graph, and ket retrieval."""

from __future__ import annotations

import json

import pytest

from kgrag import api
from kgrag.cli import main
from tests.conftest import ScriptedBackend, write_spec

GRAPHS = [{"name": "skel", "kind": "skeleton", "beta": 0.04},  # 1 of 21 chunks
          {"name": "kw", "kind": "bipartite", "tau": 1}]
QUERY = [{"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
          "theta": [0.0, 0.4], "budget_tokens": 600}]


def ket_spec(project, **changes):
    sections = {"corpus": {"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
                "graphs": GRAPHS, "query": QUERY, "answer": {"questions": 0},
                "extraction": {"max_entities": 3, "max_relationships": 2},
                "evaluate": {"metrics": ["coverage", "recall@5"]}}
    sections.update(changes)
    return write_spec(project, **sections)


@pytest.mark.integration
def test_ket_builds_with_the_real_llm_and_a_theta_sweep_reuses_the_index(project):
    spec = ket_spec(project)
    first = api.run(spec, echo=lambda s: None)
    extract = next(s for s in first.manifest.steps if s["kind"] == "extract")
    # one call per core chunk, plus a retry for each attempt that failed validation
    assert extract["notes"]["core_chunks"] == 1
    assert extract["llm"]["calls"] == extract["notes"]["attempts"]
    assert extract["notes"]["failed_chunks"] == []
    rows = {r["strategy"]: r for r in first.metrics["rows"]}
    assert set(rows) == {"ket@theta=0.0", "ket@theta=0.4"}
    assert all(r["context_tokens_mean"] <= 600 for r in rows.values())
    skeleton = next(s for s in first.manifest.steps if s["kind"] == "skeleton")
    assert skeleton["notes"]["entities"] >= 1

    again = api.run(ket_spec(project, query=[{**QUERY[0], "theta": [0.0, 0.4, 1.0]}]),
                    echo=lambda s: None)
    assert sum(s["llm"]["calls"] for s in again.manifest.steps) == 0
    ran = {s["name"] for s in again.manifest.steps if s["status"] == "ran"}
    assert ran == {"retrieve.ket@theta=1.0", "evaluate"}


def test_unparseable_extractions_are_recorded_and_the_build_goes_on(project):
    spec = ket_spec(project, graphs=[{**GRAPHS[0], "beta": 0.1}, GRAPHS[1]],
                    extraction={"keep_ungrounded": True})
    valid = json.dumps({"entities": [{"name": "Stanley", "type": "geo",
                                      "description": "a city"}], "relationships": []})
    # every attempt for the first core chunk is garbage, then the model behaves
    backend = ScriptedBackend("{oops", "{oops", "{oops", valid)
    session = api.open_session(spec, llm_backend=backend)
    from kgrag.pipeline.runner import run_plan

    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, echo=lambda s: None)
    extract = next(s for s in manifest.steps if s["kind"] == "extract")
    core = extract["notes"]["core_chunks"]
    assert core >= 2 and len(extract["notes"]["failed_chunks"]) == 1
    assert extract["llm"]["calls"] == 3 + (core - 1)  # 1 + 2 retries, then one call each
    assert any(s["kind"] == "skeleton" and s["status"] == "ran" for s in manifest.steps)


def test_a_beta_that_selects_no_chunk_is_a_clear_error(project, capsys):
    spec = ket_spec(project, graphs=[{**GRAPHS[0], "beta": 0.0}, GRAPHS[1]])
    assert main(["run", str(spec)]) == 2
    assert "empty skeleton" in capsys.readouterr().err
