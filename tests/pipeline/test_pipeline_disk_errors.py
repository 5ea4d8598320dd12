"""A run folder that cannot take the run's writes (its disk full, its file system
read-only) ends the run with one ``kgrag: error:`` line naming the folder and the cause
and exit code 2; the step being written leaves no temp folder, the completed steps stay.

Was: tracebacks (``OSError: [Errno 30] Read-only file system`` from the run lock, a
LanceDB ``No space left on device``). The first tests raise the error the libraries
raise by monkeypatching the write, and run everywhere; the others mount a real full or
read-only tmpfs over the outputs for one ``kgrag`` subprocess (``tests/disks.py``) and
skip where mounting is not allowed.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.pipeline.runner import OUTPUTS_ADVICE
from kgrag.store.vectors import VectorTable
from tests.conftest import write_spec
from tests.disks import Disk, kgrag_on, needs_mounts
from tests.standin import RuleLLM, open_with, run_with

NO_LLM = {"answer": {"questions": 0}}  # retrieval metrics only: no LLM is ever loaded
# What LanceDB raised when its disk filled up, as recorded on a full tmpfs.
LANCE_FULL = ("lance error: LanceError(IO): No space left on device (os error 28), "
              "/root/.cargo/registry/src/lance-file-13.0.0/src/writer/structural.rs:191:9")


def one_error(err: str) -> str:
    """The one message of ``err`` (beside the embedder's loading bar), no traceback."""
    lines = [line for line in err.splitlines() if line.startswith("kgrag: ")]
    assert len(lines) == 1 and lines[0].startswith("kgrag: error: ") and "Traceback" not in err
    return lines[0]


def expected(run_dir: Path, cause: str) -> str:
    return f"kgrag: error: cannot write the run's outputs in {run_dir}: {cause}; {OUTPUTS_ADVICE}"


def steps_in(run_dir: Path) -> list[str]:
    return sorted(p.name.rsplit("-", 1)[0] for p in run_dir.iterdir()
                  if p.is_dir() and not p.name.startswith("."))


def test_a_vector_table_on_a_full_disk_is_one_error(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(project, **NO_LLM)

    def full(*args: object, **kwargs: object) -> None:
        raise RuntimeError(LANCE_FULL)

    monkeypatch.setattr(VectorTable, "write", full)
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    run_dir = project / "outputs" / "tiny"
    assert main(["run", str(spec)]) == 2
    assert one_error(capsys.readouterr().err) == expected(run_dir, "no space left on its disk")
    assert steps_in(run_dir) == ["chunks", "corpus"]  # completed before, kept
    assert not list(run_dir.glob(".tmp-*"))


def test_a_read_only_outputs_folder_is_one_error(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(project, **NO_LLM)
    outputs = project / "outputs"
    real_mkdir = Path.mkdir

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        if self.is_relative_to(outputs):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["run", str(spec)]) == 2
    assert one_error(capsys.readouterr().err) == expected(
        outputs / "tiny", "it is on a read-only file system")


@pytest.fixture
def finished(project: Path) -> tuple[Path, Path]:
    """A spec run to its end (embeddings in the cache) and its run folder."""
    spec = write_spec(project, **NO_LLM)
    run_with(spec, RuleLLM())
    return spec, project / "outputs" / "tiny"


@needs_mounts
def test_a_real_read_only_outputs_folder_is_one_error(finished: tuple[Path, Path]) -> None:
    spec, run_dir = finished
    outputs = run_dir.parent
    done = kgrag_on([Disk(outputs, 4096, read_only=True)], "run", str(spec))
    assert done.returncode == 2, done.stderr
    assert one_error(done.stderr) == expected(run_dir, "it is on a read-only file system")


@needs_mounts
def test_a_real_full_disk_under_the_steps_is_one_error(finished: tuple[Path, Path]) -> None:
    spec, run_dir = finished
    for step in run_dir.iterdir():  # the index and all after it are still to build
        if step.is_dir() and not step.name.startswith(("corpus-", "chunks-")):
            shutil.rmtree(step)
    kept = steps_in(run_dir)
    done = kgrag_on([Disk(run_dir.parent, 4096, full=True)], "run", str(spec))
    assert done.returncode == 2, done.stderr
    # a disk with no room for the index is refused before any work, by the estimate of
    # kgrag.pipeline.space; a disk that fills up later is the first test's error
    assert one_error(done.stderr).startswith(
        f"kgrag: error: the corpus {spec.parent.parent / 'corpus.jsonl'} is too large for "
        f"the disk of {run_dir}: its artefacts need about ")
    assert "Traceback" not in done.stderr and steps_in(run_dir) == kept == ["chunks", "corpus"]


@needs_mounts
def test_a_full_temp_folder_under_a_query_is_one_error(finished: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    """A strategy keeps its units' texts in a file of the temp folder (``TMPDIR``): one
    with no room for them is named, with what to do, and the query ends with code 2. (A
    temp folder full to its last byte is passed over by Python, for the next candidate
    of ``tempfile.gettempdir``; this one takes Python's probe, two pages, and no more.)"""
    spec, _ = finished
    temp = tmp_path / "temp"
    done = kgrag_on([Disk(temp, 8)], "query", str(spec), "Who directed it?",
                    env={"TMPDIR": str(temp)})
    assert done.returncode == 2, done.stderr
    assert one_error(done.stderr) == (
        f"kgrag: error: cannot write the retrieval units' texts in {temp}: no space left on "
        "its disk; free some space there, or set TMPDIR to a folder on another disk")
