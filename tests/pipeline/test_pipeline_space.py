"""A corpus too large for the outputs' disk is one ``kgrag: error:`` line naming the
corpus and the space its artefacts need, with exit code 2, before any work: no step
runs and the run folder is not made. Was: the build ran until the disk filled up.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kgrag.cli import main
from kgrag.pipeline import space
from tests.conftest import write_spec

NO_LLM = {"answer": {"questions": 0}}


def tiny_disk(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(space.shutil, "disk_usage",
                        lambda path: usage._replace(free=free))


def test_a_corpus_too_large_for_the_disk_is_refused_before_any_work(
        project: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(project, **NO_LLM)
    tiny_disk(monkeypatch, free=10_000)
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("kgrag: ")]
    assert len(lines) == 1 and "Traceback" not in err
    corpus = project / "corpus.jsonl"
    assert lines[0].startswith(f"kgrag: error: the corpus {corpus} is too large for the disk "
                               f"of {project / 'outputs' / 'tiny'}: its artefacts need about ")
    assert "that disk has 10.0 KB free" in lines[0]
    assert not (project / "outputs" / "tiny").exists()


def test_the_need_grows_with_the_corpus_and_counts_only_the_steps_that_run() -> None:
    every = ["import", "chunk", "dense_index", "extract", "retrieve"]
    small = space.needed_bytes(10**6, every)
    assert space.needed_bytes(10**9, every) == pytest.approx(1000 * small, rel=1e-3)
    assert space.needed_bytes(10**9, ["retrieve"]) < space.needed_bytes(10**9, every) / 10
    assert space.needed_bytes(10**9, []) == 0
