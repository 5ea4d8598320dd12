"""Shared fixtures: an isolated project folder and model-call cache per test."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kgrag.models.backend import Completion, LLMBackend, LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own default cache folder, never the user's."""
    folder = tmp_path / "kgrag-cache"
    monkeypatch.setenv("KGRAG_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(autouse=True)
def real_llms_only_in_integration(request: pytest.FixtureRequest,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that loads a real llama.cpp model takes minutes, so it must be marked
    ``integration``; any other test that tries to load one fails here."""
    if request.node.get_closest_marker("integration") is None:
        def refuse() -> None:
            raise AssertionError("this test loads a real LLM: mark it @pytest.mark.integration")

        monkeypatch.setattr("kgrag.models.llamacpp._aligned_llama", refuse)


@pytest.fixture
def cache(tmp_path: Path) -> CallCache:
    c = CallCache(tmp_path / "calls")
    yield c
    c.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


def make_project(root: Path) -> Path:
    """A project root (it holds pyproject.toml) with a specs/ folder and a small corpus."""
    (root / "specs").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    lines = (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:3]
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    return root


def write_spec(project: Path, name: str = "tiny", **sections) -> Path:
    """Write a spec (JSON is valid YAML) into the project's specs/ folder."""
    spec = {"name": name, "corpus": {"dataset": "musique", "path": "../corpus.jsonl"}}
    spec.update(sections)
    path = project / "specs" / f"{name}.yaml"
    path.write_text(json.dumps(spec, indent=2))
    return path


# A model that never loads: tests give it a scripted backend, behind the real call cache.
TOY_SETTINGS = LLMSettings(name="toy", path=Path("/models/toy.gguf"), sha256="ab" * 32)


def toy_llm(cache: CallCache, backend: LLMBackend, **changes) -> CachedLLM:
    """The toy model (with ``changes`` to its settings) answering through ``backend``."""
    return CachedLLM(dataclasses.replace(TOY_SETTINGS, **changes), cache, backend)


class ScriptedBackend:
    """An LLM backend answering from a script, counting how often it was really called."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.requests: list[dict] = []

    def generate(self, request: dict) -> Completion:
        self.requests.append(request)
        text = self.texts[min(len(self.requests), len(self.texts)) - 1]
        return Completion(text, tokens_in=10, tokens_out=len(text.split()), cached=False)

    def logprobs(self, requests: list[dict]) -> list[dict]:
        raise AssertionError("this script answers completions only")


class RefusingBackend:
    """A backend that must not be reached: every answer has to come from the cache."""

    def generate(self, request: dict) -> Completion:
        raise AssertionError("the model was called although the cache should have answered")

    def logprobs(self, requests: list[dict]) -> list[dict]:
        raise AssertionError("the model was called although the cache should have answered")
