"""Plan fingerprints, reuse, resume after a failure, --force, and the run lock."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kgrag.errors import KgragError
from kgrag.models.usage import Usage
from kgrag.pipeline.artefacts import run_lock
from kgrag.pipeline.plan import Plan
from kgrag.pipeline.registry import KINDS, step_kind
from kgrag.pipeline.runner import run_plan

RUNS: list[str] = []


@step_kind("test-source", "1")
def _source(ctx):
    RUNS.append(ctx.step.name)
    (ctx.out_dir / "value.txt").write_text(str(ctx.config["value"]))


@step_kind("test-double", "1")
def _double(ctx):
    RUNS.append(ctx.step.name)
    if ctx.config.get("fail"):
        (ctx.out_dir / "partial.txt").write_text("half")
        raise RuntimeError("boom")
    value = int((ctx.input("source") / "value.txt").read_text())
    (ctx.out_dir / "value.txt").write_text(str(2 * value))


class Spec:
    path = Path("/specs/toy.yaml")
    sha256 = "0" * 64


class Models:
    def usage_snapshot(self):
        return Usage(), Usage()

    def describe(self):
        return {}


def plan(value=1, fail=False, note="") -> Plan:
    p = Plan()
    p.add("source", "test-source", {"value": value})
    p.add("double", "test-double", {"fail": fail, "note": note}, {"source": "source"})
    return p


def run(p: Plan, run_dir: Path, **kw):
    RUNS.clear()
    return run_plan(p, spec=Spec(), models=Models(), run_dir=run_dir, echo=lambda s: None, **kw)


def test_fingerprints_depend_on_config_inputs_and_code_version():
    a, b = plan(1), plan(2)
    assert a.steps[0].fingerprint == plan(1).steps[0].fingerprint
    assert a.steps[0].fingerprint != b.steps[0].fingerprint
    # the downstream config is equal, yet its input changed
    assert a.steps[1].fingerprint != b.steps[1].fingerprint
    KINDS["test-source"] = dataclasses.replace(KINDS["test-source"], version="2")
    try:
        assert plan(1).steps[0].fingerprint != a.steps[0].fingerprint
    finally:
        KINDS["test-source"] = dataclasses.replace(KINDS["test-source"], version="1")


def test_second_run_reuses_everything_and_manifest_says_so(tmp_path):
    run(plan(), tmp_path)
    assert RUNS == ["source", "double"]
    manifest = run(plan(), tmp_path)
    assert RUNS == []
    assert [s["status"] for s in manifest.steps] == ["reused", "reused"]
    saved = json.loads((tmp_path / "manifest.json").read_text())
    assert saved["status"] == "complete"
    assert {"name", "kind", "fingerprint", "status", "wall_s", "peak_rss_mb", "llm", "embed"} <= \
        set(saved["steps"][0])


def test_changing_one_config_reruns_only_what_depends_on_it(tmp_path):
    run(plan(1), tmp_path)
    run(plan(1, note="downstream only"), tmp_path)
    assert RUNS == ["double"]
    run(plan(3), tmp_path)
    assert RUNS == ["source", "double"]
    out = next(tmp_path.glob("double-*")).parent
    assert sorted((p / "value.txt").read_text() for p in out.glob("double-*")) == ["2", "2", "6"]


def test_a_failed_step_leaves_no_partial_artefact_and_the_next_run_resumes(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        run(plan(fail=True), tmp_path)
    assert not list(tmp_path.glob("double-*")) and not list(tmp_path.glob(".tmp-*"))
    saved = json.loads((tmp_path / "manifest.json").read_text())
    assert saved["status"] == "running" and saved["steps"][0]["name"] == "source"
    run(plan(), tmp_path)
    assert RUNS == ["double"]


def test_force_reruns_the_step_and_everything_downstream(tmp_path):
    run(plan(), tmp_path)
    run(plan(), tmp_path, force=["source"])
    assert RUNS == ["source", "double"]
    run(plan(), tmp_path, force=["test-double"])
    assert RUNS == ["double"]
    with pytest.raises(KgragError, match="no such step"):
        run(plan(), tmp_path, force=["nope"])


def test_a_second_run_on_a_locked_folder_fails_clearly(tmp_path):
    with run_lock(tmp_path), pytest.raises(KgragError, match="locked by another kgrag run"):
        run(plan(), tmp_path)
