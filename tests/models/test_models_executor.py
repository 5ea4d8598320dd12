"""The executor: where a step's model calls over many work items run.

A Ray run on a local two-worker instance (started here) writes exactly the artefacts a
local run writes, through the same cache keys, and a later local run replays its
calls; the executor changes no fingerprint; an address that does not answer is one
error, fast, and keeps what was done. The stand-in LLM (``tests.standin.RuleLLM``)
reaches the Ray workers pickled; its output is a function of the request, as a real
model's is (``kgrag.models.llm``), so which worker answers does not matter.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from kgrag import api, cli
from kgrag.errors import KgragError
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.ray_actors import ModelWorker
from kgrag.models.registry import file_sha256
from kgrag.pipeline.artefacts import CALLS_RECORD
from kgrag.pipeline.integrity import file_listing
from kgrag.pipeline.runner import run_plan
from tests.conftest import REPO, SHARED_DATA, RefusingBackend, make_project, write_spec
from tests.standin import RuleLLM

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

LLM_STEPS = ("extract.h", "summaries.h", "gates.h")  # every kind that maps model calls
UNREACHABLE = "127.0.0.1:1"


def hug_spec(root: Path, cache: Path, **executor) -> Path:
    """A HugRAG build on two HolisQA articles: extraction, module summaries, gates."""
    project = make_project(root)
    shutil.copytree(SHARED_DATA / "holisqa" / "business", project / "business")
    sections = {"corpus": {"dataset": "holisqa", "path": "../business", "limit": 2},
                "cache": {"dir": str(cache)},
                "chunking": {"size": 128, "overlap": 16, "title": False},
                "graphs": [{"name": "h", "kind": "hierarchy", "max_cluster_size": 4,
                            "gate_min_similarity": 0.0}],
                "query": [{"name": "hug", "strategy": "hugrag", "hierarchy": "h"}],
                "answer": {"questions": 0}, "evaluate": {"metrics": ["recall@5"]}}
    if executor:
        sections["executor"] = executor
    return write_spec(project, "hug", **sections)


def run(spec: Path, backend) -> tuple[api.Session, dict[str, dict]]:
    session = api.open_session(spec, llm_backend=backend)
    try:
        manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                            run_dir=session.run_dir, echo=lambda line: None)
    finally:
        session.cache.close()
    return session, {step["name"]: step for step in manifest.steps}


def contents(session: api.Session, step: str) -> dict[str, str]:
    """The step's parquet files by sha256 (LanceDB folders name files at random) and the
    cache keys it used."""
    folder = session.artefact(step)
    files = {name: listed["sha256"] for name, listed in file_listing(folder).items()
             if name.endswith(".parquet")}
    return {**files, CALLS_RECORD: (folder / CALLS_RECORD).read_text()}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_the_executor_changes_no_fingerprint(tmp_path: Path) -> None:
    plain = api.open_session(hug_spec(tmp_path / "a", tmp_path / "cache"))
    on_ray = api.open_session(hug_spec(tmp_path / "b", tmp_path / "cache", kind="ray",
                                       address=UNREACHABLE, workers=2))
    assert [(s.name, s.fingerprint) for s in plain.plan.steps] == \
        [(s.name, s.fingerprint) for s in on_ray.plan.steps]


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_an_address_that_does_not_answer_is_one_error_and_keeps_the_work_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not ray.is_initialized()
    spec = hug_spec(tmp_path / "p", tmp_path / "cache", kind="ray", address=UNREACHABLE)
    started = time.monotonic()
    assert cli.main(["run", str(spec)]) == 2
    assert time.monotonic() - started < 60  # the embedder's steps ran before; Ray: 0 s
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and err[0].startswith(
        f"kgrag: error: the Ray address {UNREACHABLE} does not answer (")
    # the steps before extraction are kept: a local run reuses them
    on_ray = spec.read_text()
    spec.write_text(on_ray.replace('"kind": "ray"', '"kind": "local"'))
    _, steps = run(spec, RuleLLM())
    assert steps["chunks"]["status"] == "reused" and steps["extract.h"]["status"] == "ran"
    # back on that address, every step is reused and Ray is never asked; the bundle of
    # the run replays offline: no model call, no cluster
    spec.write_text(on_ray)
    _, steps = run(spec, RefusingBackend())
    assert {step["status"] for step in steps.values()} == {"reused"}
    api.bundle(spec, tmp_path / "hug.kgrag")
    replayed = api.replay(tmp_path / "hug.kgrag", tmp_path / "replay", echo=lambda s: None)
    assert replayed.model_calls == 0 and not replayed.differences and not ray.is_initialized()


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch):
    """A Ray instance of two CPUs on this machine, its workers importing this checkout
    (the stand-in LLM's module included); stopped at the end."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_a_ray_run_writes_what_a_local_run_writes_and_a_local_run_replays_it(
        tmp_path: Path, local_ray: str) -> None:
    local, local_steps = run(hug_spec(tmp_path / "local", tmp_path / "local-cache"), RuleLLM())
    here = RuleLLM()  # this process's copy: the workers answer with their own
    on_ray, ray_steps = run(hug_spec(tmp_path / "ray", tmp_path / "ray-cache", kind="ray",
                                     address=local_ray, workers=2), here)
    assert set(here.calls) == {"filter"}  # retrieval's call; the build's all ran on Ray
    for step in local_steps:  # usage and cache keys alike; timings aside, files too
        assert ray_steps[step]["fingerprint"] == local_steps[step]["fingerprint"]
        assert ray_steps[step]["llm"] == local_steps[step]["llm"], step
    for step in LLM_STEPS:
        assert ray_steps[step]["llm"]["calls"] > 0
        assert contents(on_ray, step) == contents(local, step), step
    assert ray_steps["gates.h"]["notes"]["checks"] > 1

    # a later local run on the Ray run's cache replays every call: the model never runs
    replayed, replay_steps = run(hug_spec(tmp_path / "again", tmp_path / "ray-cache"),
                                 RefusingBackend())
    for step in LLM_STEPS:
        assert replay_steps[step]["llm"]["calls"] == 0
        assert replay_steps[step]["llm"]["cache_hits"] == ray_steps[step]["llm"]["calls"]
        assert contents(replayed, step) == contents(on_ray, step)
    entries = []
    for folder in ("ray-cache", "local-cache"):
        cache = CallCache(tmp_path / folder)
        entries.append(cache.stats().entries)
        cache.close()
    assert entries[0] == entries[1]


def test_a_worker_refuses_a_model_file_other_than_the_one_the_cache_keys_name(
        tmp_path: Path) -> None:
    """On a cluster each node loads the model from its own disk: a missing or other file
    would answer under the keys of the file named here, so the worker says so instead."""
    other = tmp_path / "model.gguf"
    other.write_bytes(b"not the model")
    for path, found in ((other, "(" + file_sha256(other)), (tmp_path / "none.gguf", "(no such")):
        settings = LLMSettings(name="toy", path=path, sha256="ab" * 32)
        worker = ModelWorker(settings, LlamaCppBackend(settings))
        with pytest.raises(KgragError, match=rf"has another .* {re.escape(found)}"):
            worker.generate({"prompt": "x"})
