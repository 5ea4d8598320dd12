"""``kgrag gc``: after a spec changes, exactly the folders its plan no longer reads go
(superseded artefacts, their resume state, temporary folders of killed runs), and the
next run reuses every folder left with no model call; what the plan reads, what another
spec names by path and what another spec writing the same run folder reads stay."""

from __future__ import annotations

import json
from pathlib import Path

from kgrag import api
from kgrag.cli import main
from kgrag.pipeline.artefacts import run_lock
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with, run_with

QUERY = [{"name": "dense", "strategy": "naive", "budget_tokens": 300},
         {"name": "bm25", "strategy": "bm25", "budget_tokens": 300}]


def spec_with(project: Path, budget: int, name: str = "tiny", **changes) -> Path:
    query = [dict(QUERY[0], budget_tokens=budget), QUERY[1]]
    return write_spec(project, name, query=query, answer={"questions": 2},
                      evaluate={"metrics": ["f1", "coverage"]}, **changes)


def folders(run_dir: Path) -> set[str]:
    return {p.name for p in run_dir.iterdir() if p.is_dir()}


def test_gc_removes_exactly_the_superseded_folders_and_the_next_run_pays_nothing(project,
                                                                                 capsys):
    first = spec_with(project, 300)
    run_with(first, RuleLLM())
    run_dir = api.open_session(first).run_dir
    before = folders(run_dir)
    changed = spec_with(project, 200)  # the same spec file, a smaller dense budget
    steps, _, _ = run_with(changed, RuleLLM())
    reran = {name for name, step in steps.items() if step["status"] == "ran"}
    assert reran == {"retrieve.dense", "answer.dense", "evaluate"}
    old = {f for f in before if f.rsplit("-", 1)[0] in reran}
    assert len(old) == 3 and old <= folders(run_dir)
    killed = run_dir / ".tmp-dense-0123456789ab-4242"  # a run killed while writing
    killed.mkdir()
    (killed / "part.parquet").write_bytes(b"x" * 5000)
    orphan = run_dir / ".resume-train.old-0123456789ab"  # a superseded step's resume state
    orphan.mkdir()
    live = run_dir / f".resume-{steps['dense']['artefact']}"  # a current step's: kept
    live.mkdir()

    assert main(["gc", str(changed), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in [*old, killed.name, orphan.name])
    assert "would remove (dry run) 5 folder(s)" in listed
    assert folders(run_dir) >= old | {killed.name, orphan.name}  # nothing removed

    assert main(["gc", str(changed)]) == 0
    out = capsys.readouterr().out
    assert "removed 5 folder(s)" in out and "left by a killed run" in out
    assert folders(run_dir) == (before - old) | {steps[n]["artefact"] for n in reran} | {
        live.name}
    assert (run_dir / "manifest.json").exists() and (run_dir / "metrics.json").exists()

    llm = RuleLLM()
    steps, _, _ = run_with(changed, llm)
    assert {step["status"] for step in steps.values()} == {"reused"}
    assert llm.calls == []
    assert sum(s["llm"]["calls"] + s["embed"]["calls"] for s in steps.values()) == 0
    assert main(["gc", str(changed)]) == 0
    assert "removed 0 folder(s)" in capsys.readouterr().out


def test_gc_keeps_what_other_specs_name_or_read(project, capsys):
    first = spec_with(project, 300)
    steps, _, _ = run_with(first, RuleLLM())
    old_retrieval = steps["retrieve.dense"]["artefact"]
    old_answers = steps["answer.dense"]["artefact"]
    # another spec reads a folder of this run by path (as ARK's transfer specs name a
    # trained model), in a comment too: a spec kept for later still names it
    reader = project / "specs" / "sub" / "reader.yaml"
    reader.parent.mkdir()
    reader.write_text(f"name: reader\n# uses ../../outputs/tiny/{old_retrieval}/retrieved.parquet\n"
                      "corpus: {dataset: musique, path: ../../corpus.jsonl}\n")
    # and a second spec writing into the same run folder reads the old answers' plan
    twin = spec_with(project, 300, name="twin")
    twin.write_text(twin.read_text().replace('"name": "twin"', '"name": "tiny"'))
    changed = spec_with(project, 200)
    run_with(changed, RuleLLM())
    assert main(["gc", str(changed)]) == 0
    out = capsys.readouterr().out
    assert f"kept {old_retrieval}: needed by {reader}, {twin}" in out
    assert f"kept {old_answers}: needed by {twin}" in out
    run_dir = api.open_session(changed).run_dir
    assert {old_retrieval, old_answers} <= folders(run_dir)
    assert "removed 0 folder(s)" in out  # the twin still reads every old folder
    twin.unlink()
    assert main(["gc", str(changed)]) == 0
    out = capsys.readouterr().out
    assert old_retrieval in folders(run_dir) and old_answers not in folders(run_dir)
    assert "removed 2 folder(s)" in out  # the old answers and the old evaluation


def test_gc_waits_for_no_run_and_never_touches_the_cache(project, capsys, isolated_cache):
    spec = spec_with(project, 300)
    session = open_with(spec, RuleLLM())
    run_with(spec, RuleLLM())
    entries = api.cache_stats(isolated_cache).entries
    with run_lock(session.run_dir):
        assert main(["gc", str(spec)]) == 2
    assert "locked by another kgrag run" in capsys.readouterr().err
    assert main(["gc", str(spec)]) == 0
    assert api.cache_stats(isolated_cache).entries == entries
    assert json.loads((session.run_dir / "manifest.json").read_text())["status"] == "complete"
