"""Damaged artefacts: each lists its files, and a run, a query or a dry run that finds
one changed since rebuilds it (from the call cache) instead of reusing it; a run folder's
published metrics.json always comes from the evaluation it reuses."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.contents.answers import ANSWERS
from kgrag.contents.chunks import CHUNKS_FILE
from kgrag.contents.dense import DENSE_TABLE
from kgrag.contents.metrics import METRICS
from kgrag.contents.retrieved import RETRIEVED
from kgrag.pipeline import integrity
from kgrag.pipeline.integrity import LISTING, damage, file_listing, write_listing
from kgrag.store.vectors import VectorTable
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with, run_with


def test_the_listing_catches_files_missing_resized_or_changed(tmp_path: Path) -> None:
    (tmp_path / "table.lance" / "data").mkdir(parents=True)
    (tmp_path / "table.lance" / "data" / "a.lance").write_bytes(b"vectors")
    (tmp_path / "rows.parquet").write_bytes(b"rows")
    write_listing(tmp_path)
    assert list(file_listing(tmp_path)) == ["rows.parquet", "table.lance/data/a.lance"]
    assert damage(tmp_path) is None
    (tmp_path / "notes.txt").write_text("added later")
    assert damage(tmp_path) is None
    (tmp_path / "rows.parquet").write_bytes(b"ROWS")
    assert damage(tmp_path) == "rows.parquet changed (its sha256 differs from the listing)"
    (tmp_path / "rows.parquet").write_bytes(b"rows, longer")
    assert damage(tmp_path) == "rows.parquet is 12 bytes, listed as 4"
    (tmp_path / "rows.parquet").write_bytes(b"rows")
    (tmp_path / "table.lance" / "data" / "a.lance").unlink()
    assert damage(tmp_path) == "table.lance/data/a.lance missing"
    (tmp_path / LISTING).write_text('{"files": ')
    assert damage(tmp_path) == f"{LISTING} unreadable"


def test_a_folder_without_its_listing_is_read_through_not_trusted(tmp_path: Path) -> None:
    """Was: a folder without ``files.json`` was taken as it stood, and the runner listed
    it with whatever damage it held, which made that damage permanent."""
    pl.DataFrame({"chunk_id": ["c1", "c2"]}).write_parquet(tmp_path / CHUNKS_FILE)
    assert damage(tmp_path) is None
    assert integrity.check(tmp_path) is None and (tmp_path / LISTING).exists()  # listed now
    (tmp_path / LISTING).unlink()
    (tmp_path / CHUNKS_FILE).write_bytes((tmp_path / CHUNKS_FILE).read_bytes()[:-9])
    problem = damage(tmp_path)
    assert problem.startswith(f"{LISTING} missing and {CHUNKS_FILE} cannot be read (")
    assert integrity.check(tmp_path) == problem and not (tmp_path / LISTING).exists()


def test_files_above_the_hash_limit_are_checked_by_size_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(integrity, "HASH_LIMIT", 4)
    (tmp_path / "large.bin").write_bytes(b"12345")
    (tmp_path / "small.bin").write_bytes(b"1234")
    write_listing(tmp_path)
    listed = file_listing(tmp_path)
    assert listed["large.bin"]["sha256"] is None and len(listed["small.bin"]["sha256"]) == 64
    (tmp_path / "large.bin").write_bytes(b"54321")
    assert damage(tmp_path) is None
    (tmp_path / "large.bin").write_bytes(b"123456")
    assert damage(tmp_path) == "large.bin is 6 bytes, listed as 5"


def delete_vectors(folder: Path) -> str:
    """The dense step's LanceDB data file deleted; returns the problem it makes."""
    data = next((folder / f"{DENSE_TABLE}.lance" / "data").glob("*.lance"))
    data.unlink()
    return f"{data.relative_to(folder).as_posix()} missing"


def delete_chunks(folder: Path) -> str:
    (folder / CHUNKS_FILE).unlink()
    return f"{CHUNKS_FILE} missing"


def overwrite_answers(folder: Path) -> str:
    text = "the answers, edited by hand\n"
    (folder / ANSWERS).write_text(text)
    return f"{ANSWERS} is {len(text)} bytes"


def read_vectors(folder: Path) -> Any:
    ids, matrix = VectorTable.open(folder, DENSE_TABLE).matrix()
    return ids, matrix.tolist()


def read_table(name: str) -> Callable[[Path], Any]:
    return lambda folder: pl.read_parquet(folder / name).to_dicts()


@pytest.mark.parametrize("step, spoil, read", [
    ("dense", delete_vectors, read_vectors),
    ("chunks", delete_chunks, read_table(CHUNKS_FILE)),
    ("answer.dense", overwrite_answers, read_table(ANSWERS)),
])
def test_a_damaged_step_is_rebuilt_from_the_cache_and_named_in_a_warning(
        project: Path, caplog: pytest.LogCaptureFixture, step: str,
        spoil: Callable[[Path], str], read: Callable[[Path], Any]) -> None:
    spec = write_spec(project)
    built, rows, _ = run_with(spec, RuleLLM())
    folder = project / "outputs" / "tiny" / built[step]["artefact"]
    before = read(folder)
    problem = spoil(folder)

    llm = RuleLLM()
    with caplog.at_level(logging.WARNING):
        again, rows_again, _ = run_with(spec, llm)
    assert f"{step}: artefact {folder.name} is damaged ({problem}" in caplog.text
    assert again[step]["status"] == "ran" and again[step]["damaged"].startswith(problem)
    assert {name for name, s in again.items() if s["status"] != "reused"} == {step}
    # no model call: every request the first build made is answered by the cache
    assert llm.calls == [] and again[step]["llm"]["calls"] == 0
    first = built[step]["llm"]
    assert again[step]["llm"]["cache_hits"] == first["calls"] + first["cache_hits"]
    assert read(folder) == before and damage(folder) is None
    assert rows_again == rows


def cut_retrieved(folder: Path) -> None:
    path = folder / RETRIEVED
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def read_retrieved(folder: Path) -> Any:
    """What was retrieved, without its timings (a rebuild measures its own)."""
    return pl.read_parquet(folder / RETRIEVED).drop("retrieval_ms", "llm_ms").to_dicts()


@pytest.mark.parametrize("step, spoil, named, read", [
    ("retrieve.dense", cut_retrieved, RETRIEVED, read_retrieved),
    ("dense", delete_vectors, f"{DENSE_TABLE}.lance", read_vectors),
])
def test_an_unlisted_damaged_step_is_rebuilt_not_listed_as_it_is(
        project: Path, caplog: pytest.LogCaptureFixture, step: str,
        spoil: Callable[[Path], object], named: str, read: Callable[[Path], Any]) -> None:
    """Was: without its listing, the damaged folder was listed as it stood; a cut
    retrieved.parquet then failed every later report, a deleted vector data file every
    query, and the run exited 0."""
    spec = write_spec(project)
    built, rows, _ = run_with(spec, RuleLLM())
    folder = project / "outputs" / "tiny" / built[step]["artefact"]
    before = read(folder)
    (folder / LISTING).unlink()  # nothing left to compare the files with: they must read
    spoil(folder)
    llm = RuleLLM()
    with caplog.at_level(logging.WARNING):
        again, rows_again, _ = run_with(spec, llm)
    problem = f"{LISTING} missing and {named} cannot be read ("
    assert f"{step}: artefact {folder.name} is damaged ({problem}" in caplog.text
    assert again[step]["status"] == "ran" and llm.calls == []
    assert {name for name, s in again.items() if s["status"] != "reused"} == {step}
    assert read(folder) == before and (folder / LISTING).exists() and damage(folder) is None
    assert rows_again == rows


def test_a_query_rebuilds_an_unlisted_index_whose_vectors_are_gone(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    spec = write_spec(project)
    built, _, _ = run_with(spec, RuleLLM())
    folder = project / "outputs" / "tiny" / built["dense"]["artefact"]
    (folder / LISTING).unlink()
    delete_vectors(folder)
    assert not api.dry_run(api.open_session(spec))[2].reuse  # what --dry-run plans
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    code = main(["query", str(spec), "Who directed the film?"])
    assert code == 0 and "answer: An answer from the evidence" in capsys.readouterr().out
    assert damage(folder) is None


def test_a_query_rebuilds_a_damaged_index_instead_of_failing(
        project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(project)
    built, _, _ = run_with(spec, RuleLLM())
    folder = project / "outputs" / "tiny" / built["dense"]["artefact"]
    problem = delete_vectors(folder)
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    with caplog.at_level(logging.WARNING):
        code = main(["query", str(spec), "Who directed the film?"])
    assert code == 0 and "answer: An answer from the evidence" in capsys.readouterr().out
    assert f"dense: artefact {folder.name} is damaged ({problem})" in caplog.text
    assert damage(folder) is None


def test_the_dry_run_plans_to_rebuild_a_damaged_artefact(project: Path) -> None:
    spec = write_spec(project)
    built, _, _ = run_with(spec, RuleLLM())
    (project / "outputs" / "tiny" / built["chunks"]["artefact"] / CHUNKS_FILE).write_text("x")
    reuse = {p.step.name: p.reuse for p in api.dry_run(api.open_session(spec))}
    assert reuse.pop("chunks") is False and all(reuse.values())


def test_a_command_reads_each_reused_artefact_through_once(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """Was: ``kgrag run`` compared every reused artefact's files with their listing twice,
    to plan (the space check) and again under the run's lock; ``kgrag query`` did so for
    the steps before the index it had to rebuild. Hashing them is the cost of a reuse."""
    spec = write_spec(project)
    built, _, _ = run_with(spec, RuleLLM())
    compared: Counter[Path] = Counter()
    differs = integrity._differs

    def counted(path: Path, listed: dict[str, Any]) -> str | None:
        compared[path] += 1
        return differs(path, listed)

    monkeypatch.setattr(integrity, "_differs", counted)
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    assert main(["run", str(spec)]) == 0
    every = {project / "outputs" / "tiny" / step["artefact"] / name
             for step in built.values()
             for name in file_listing(project / "outputs" / "tiny" / step["artefact"])}
    assert set(compared) == every and set(compared.values()) == {1}

    dense = project / "outputs" / "tiny" / built["dense"]["artefact"]
    delete_vectors(dense)
    compared.clear()
    assert main(["query", str(spec), "Who directed the film?"]) == 0
    assert "answer: An answer from the evidence" in capsys.readouterr().out
    upstream = {path: n for path, n in compared.items() if dense not in path.parents}
    assert upstream and set(upstream.values()) == {1}
    assert damage(dense) is None


def test_a_reused_evaluation_publishes_its_metrics_again(project: Path) -> None:
    def metrics(*names: str) -> list[dict]:
        spec = write_spec(project, answer={"questions": 0}, evaluate={"metrics": list(names)})
        return list(run_with(spec, RuleLLM())[1].values())

    coverage = metrics("coverage")
    assert metrics("recall@5") != coverage
    assert metrics("coverage") == coverage  # reused, and its metrics.json copied back
    (project / "outputs" / "tiny" / METRICS).unlink()
    assert metrics("coverage") == coverage


ANN = {"ann": {"min_rows": 10, "index": "ivf_hnsw_sq", "nprobes": 1000}}


@pytest.mark.parametrize("listed", [True, False])
def test_a_damaged_ann_index_is_rebuilt_and_answers_as_before(
        project: Path, caplog: pytest.LogCaptureFixture, listed: bool) -> None:
    """The dense index past ``dense_index.ann.min_rows`` carries a LanceDB ANN index:
    its files are listed like the table's, and an index file overwritten (same size, or
    cut short with the listing gone) makes the step rebuild, with the same answers."""
    spec = write_spec(project, dense_index=ANN)
    built, rows, _ = run_with(spec, RuleLLM())
    folder = project / "outputs" / "tiny" / built["dense"]["artefact"]
    assert built["dense"]["notes"]["ann"] == "ivf_hnsw_sq"
    index = min((folder / f"{DENSE_TABLE}.lance" / "_indices").rglob("*.idx"))
    named = index.relative_to(folder).as_posix()
    assert named in file_listing(folder)
    if listed:
        index.write_bytes(bytes(index.stat().st_size))
        problem = f"{named} changed"
    else:
        (folder / LISTING).unlink()
        index.write_bytes(index.read_bytes()[:40])
        problem = f"{LISTING} missing and {DENSE_TABLE}.lance cannot be read ("
    with caplog.at_level(logging.WARNING):
        again, rows_again, _ = run_with(spec, RuleLLM())
    assert f"dense: artefact {folder.name} is damaged ({problem}" in caplog.text
    assert again["dense"]["status"] == "ran" and damage(folder) is None
    assert {name for name, s in again.items() if s["status"] != "reused"} == {"dense"}
    assert sorted((folder / f"{DENSE_TABLE}.lance" / "_indices").rglob("*.idx"))
    assert rows_again == rows
