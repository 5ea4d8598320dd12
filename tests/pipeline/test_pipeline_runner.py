"""Plan fingerprints, reuse, resume after a failure, --force, the run lock, and damaged
artefacts rebuilt instead of reused."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from kgrag.configuration import default_cache_dir
from kgrag.errors import KgragError
from kgrag.models.cache import CallCache
from kgrag.models.usage import Usage
from kgrag.pipeline.artefacts import CALLS_RECORD, run_lock
from kgrag.pipeline.integrity import LISTING
from kgrag.pipeline.plan import Plan
from kgrag.pipeline.runner import run_plan
from kgrag.steps import KINDS
from kgrag.steps.step import BUILD_RECORD, step_kind

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
    def __init__(self) -> None:
        self.cache = CallCache(default_cache_dir())  # the test's own (conftest)

    def usage_snapshot(self):
        return Usage(), Usage()

    def describe(self, configs):
        return {}


@pytest.fixture(autouse=True)
def toy_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's own kinds, listed beside kgrag's for these tests only."""
    for kind in (_source, _double, _lookup):
        monkeypatch.setitem(KINDS, kind.name, kind)


def plan(value=1, fail=False, note="") -> Plan:
    p = Plan(KINDS)
    p.add("source", "test-source", {"value": value})
    p.add("double", "test-double", {"fail": fail, "note": note}, {"source": "source"})
    return p


def run(p: Plan, run_dir: Path, **kw):
    RUNS.clear()
    return run_plan(p, spec=Spec(), models=Models(), run_dir=run_dir, echo=lambda s: None, **kw)


def test_fingerprints_depend_on_config_inputs_and_code_version(monkeypatch):
    a, b = plan(1), plan(2)
    assert a.steps[0].fingerprint == plan(1).steps[0].fingerprint
    assert a.steps[0].fingerprint != b.steps[0].fingerprint
    # the downstream config is equal, yet its input changed
    assert a.steps[1].fingerprint != b.steps[1].fingerprint
    monkeypatch.setitem(KINDS, "test-source", dataclasses.replace(_source, version="2"))
    assert plan(1).steps[0].fingerprint != a.steps[0].fingerprint


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


def test_the_manifest_records_the_machine_answers_depend_on(tmp_path):
    """Greedy answers follow the CPU llama.cpp runs on, so the machine is recorded."""
    run(plan(), tmp_path)
    machine = json.loads((tmp_path / "manifest.json").read_text())["machine"]
    assert machine["cpu"] and machine["cores"] >= 1 and machine["platform"]
    assert "AVX" in machine["llama_cpp"] or "NEON" in machine["llama_cpp"]


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


def test_every_artefact_lists_its_files(tmp_path):
    run(plan(), tmp_path)
    for folder in [*tmp_path.glob("source-*"), *tmp_path.glob("double-*")]:
        listed = json.loads((folder / LISTING).read_text())["files"]
        assert set(listed) == {"value.txt", BUILD_RECORD, CALLS_RECORD}  # not the listing
        assert listed["value.txt"]["size"] == 1 and len(listed["value.txt"]["sha256"]) == 64


def test_a_damaged_artefact_is_rebuilt_with_a_warning_and_the_rest_reused(tmp_path, caplog):
    run(plan(), tmp_path)
    source = next(tmp_path.glob("source-*"))
    (source / "value.txt").write_text("7")  # same size, other content
    with caplog.at_level(logging.WARNING):
        manifest = run(plan(), tmp_path)
    assert RUNS == ["source"]  # "double" depends on its fingerprint, which is unchanged
    assert f"source: artefact {source.name} is damaged (value.txt changed" in caplog.text
    record = manifest.steps[0]
    assert record["status"] == "ran" and record["damaged"].startswith("value.txt changed")
    assert manifest.steps[1]["status"] == "reused"
    assert (source / "value.txt").read_text() == "1"
    assert json.loads((source / BUILD_RECORD).read_text())["damaged"] == record["damaged"]
    assert run(plan(), tmp_path).steps[0]["status"] == "reused"


def test_an_artefact_without_a_listing_that_reads_whole_is_listed_then_checked(tmp_path):
    run(plan(), tmp_path)
    source = next(tmp_path.glob("source-*"))
    (source / LISTING).unlink()  # as built by a kgrag that wrote no listing
    manifest = run(plan(), tmp_path)
    assert RUNS == [] and [s["status"] for s in manifest.steps] == ["reused", "reused"]
    assert set(json.loads((source / LISTING).read_text())["files"]) == {"value.txt", BUILD_RECORD,
                                                                       CALLS_RECORD}
    (source / "value.txt").unlink()
    run(plan(), tmp_path)
    assert RUNS == ["source"]


@step_kind("test-lookup", "1")
def _lookup(ctx):
    for word in ctx.config["words"]:
        ctx.models.cache.get_or_compute_many([f"toy:{word}"], "toy", lambda todo: [{"text": "x"}])
    (ctx.out_dir / "done.txt").write_text("")


def test_an_artefact_keeps_the_keys_of_the_cache_entries_its_step_used(tmp_path):
    p = Plan(KINDS)
    p.add("first", "test-lookup", {"words": ["b", "a"]})
    p.add("second", "test-lookup", {"words": ["a", "c"]}, {"first": "first"})
    run(p, tmp_path)
    for name, keys in (("first", ["toy:a", "toy:b"]), ("second", ["toy:a", "toy:c"])):
        # a hit is recorded as well as a computed call ("toy:a" in the second step)
        assert json.loads((next(tmp_path.glob(f"{name}-*")) / CALLS_RECORD).read_text()) == keys
