"""End to end on the real bundled models (llama.cpp Gemma 3 270M, all-MiniLM-L6-v2).

Small on purpose (3 MuSiQue questions, 60 paragraphs, 2 answers per strategy)
so it runs in well under a minute once the models are on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.models.backend import LLMSettings
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.registry import resolve_llm
from tests.conftest import write_spec

pytestmark = pytest.mark.integration

QUERY = [{"name": "dense", "strategy": "naive", "budget_tokens": 400}]


def tiny(project, **changes):
    sections = {"query": QUERY, "answer": {"questions": 2, "max_tokens": 16},
                "evaluate": {"metrics": ["em", "f1", "coverage", "recall@5"]}}
    sections.update(changes)
    return write_spec(project, **sections)


def model_calls(manifest) -> tuple[int, int]:
    return (sum(s["llm"]["calls"] for s in manifest.steps),
            sum(s["embed"]["calls"] for s in manifest.steps))


def test_run_twice_second_run_makes_no_model_calls(project, capsys):
    spec = tiny(project)
    first = api.run(spec, echo=lambda s: None)
    llm_calls, embed_calls = model_calls(first.manifest)
    assert llm_calls == 2 and embed_calls > 60
    rows = first.metrics["rows"]
    assert first.metrics["n_questions"] == 3 and rows[0]["n_answered"] == 2
    assert 0 <= rows[0]["coverage"] <= 1 and rows[0]["context_tokens_mean"] <= 400
    assert rows[0]["llm_tokens_in"] > 0

    assert main(["run", str(spec), "--dry-run"]) == 0  # everything built: nothing to pay
    assert "at most 0 LLM calls" in capsys.readouterr().out
    second = api.run(spec, echo=lambda s: None)
    assert model_calls(second.manifest) == (0, 0)
    assert {s["status"] for s in second.manifest.steps} == {"reused"}
    assert second.metrics == first.metrics

    # A query parameter change reruns retrieval onwards; the index is reused and the
    # shared cache spares every embedding.
    third = api.run(tiny(project, query=[{**QUERY[0], "budget_tokens": 300}]),
                    echo=lambda s: None)
    status = {s["name"]: s["status"] for s in third.manifest.steps}
    assert status["dense"] == status["chunks"] == "reused"
    assert status["retrieve.dense"] == "ran"
    assert model_calls(third.manifest)[1] == 0


def test_query_command_answers_one_question(project, capsys):
    spec = tiny(project)
    code = main(["query", str(spec), "Where is the Mountrail County Courthouse?"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Mountrail County Courthouse" in out and "answer:" in out


def test_a_killed_run_resumes_from_completed_steps(project):
    spec = tiny(project, answer={"questions": 3, "max_tokens": 16})
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kgrag.cli", "run", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    manifest = project / "outputs" / "tiny" / "manifest.json"
    deadline = time.time() + 300
    while time.time() < deadline:
        if manifest.exists() and any(s["name"] == "dense"
                                     for s in json.loads(manifest.read_text())["steps"]):
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = api.run(spec, echo=lambda s: None)
    status = {s["name"]: s["status"] for s in resumed.manifest.steps}
    assert status["corpus"] == status["chunks"] == status["dense"] == "reused"
    assert not list((project / "outputs" / "tiny").glob(".tmp-*"))
    assert resumed.metrics["rows"][0]["n_answered"] == 3


@pytest.mark.parametrize("asked", [None, 1, 1024])
def test_llama_decodes_on_every_usable_core_unless_told(asked):
    model = resolve_llm("smollm2-135m")
    backend = LlamaCppBackend(LLMSettings(name=model.name, path=model.path,
                                          sha256=model.sha256, n_ctx=512, n_threads=asked))
    cores = len(os.sched_getaffinity(0))
    assert backend._model().n_threads == min(asked or cores, cores)
