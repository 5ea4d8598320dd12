"""The loaded Spec: defaults, immutability, paths and hashing helpers."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from kgrag.errors import KgragError
from kgrag.spec import Spec, load_spec, thaw
from kgrag.spec.schema import SCHEMA, VALIDATOR, fill_defaults

MINIMAL = "name: demo\ncorpus:\n  dataset: jsonl\n  path: data/docs.jsonl\n"


def write(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    """Write a spec file, creating its folder, and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_minimal_spec_gets_every_default(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL))
    assert spec.name == "demo"
    assert spec.models["llm"]["model"] == "gemma3-270m"
    assert spec.models["llm"]["n_ctx"] == 8192
    assert spec.models["llm"]["n_threads"] is None
    assert spec.models["embedder"] == {"model": "all-MiniLM-L6-v2", "batch_size": 64,
                                       "backend": "torch"}
    assert spec.chunking == {"size": 256, "overlap": 32, "title": True}
    assert thaw(spec.query) == [
        {"name": "dense", "strategy": "naive", "top_k": None, "budget_tokens": 2000}
    ]
    assert spec.corpus["fields"] == {"id": "id", "title": "title", "text": "text"}
    assert spec.corpus["limit"] is None
    assert spec.answer == {"max_tokens": None, "length": "short", "questions": None,
                           "prompt": "completion"}
    assert spec.evaluate["metrics"] == ("em", "f1", "coverage", "recall@5")
    assert spec.data["outputs"] == "outputs"
    assert spec.data["cache"] == {"dir": None}


def test_given_values_kept_and_strategy_items_filled(tmp_path: Path) -> None:
    text = MINIMAL + (
        "models:\n  llm:\n    temperature: 0.7\n"
        "query:\n  - name: tight\n    strategy: naive\n    budget_tokens: 300\n"
    )
    spec = load_spec(write(tmp_path, text))
    assert spec.models["llm"]["temperature"] == 0.7
    assert spec.models["llm"]["model"] == "gemma3-270m"
    assert spec.models["embedder"]["batch_size"] == 64
    assert thaw(spec.query) == [
        {"name": "tight", "strategy": "naive", "top_k": None, "budget_tokens": 300}
    ]


def test_filled_defaults_are_themselves_valid() -> None:
    minimal = {"name": "x", "corpus": {"dataset": "text", "path": "docs"}}
    assert list(VALIDATOR.iter_errors(fill_defaults(minimal, SCHEMA))) == []


def test_fill_defaults_does_not_mutate_its_input() -> None:
    instance = {"name": "x", "corpus": {"dataset": "text", "path": "docs"}, "query": []}
    before = copy.deepcopy(instance)
    filled = fill_defaults(instance, SCHEMA)
    assert instance == before
    filled["corpus"]["path"] = "changed"
    assert instance["corpus"]["path"] == "docs"


def test_fill_defaults_copies_schema_defaults() -> None:
    first = fill_defaults({}, SCHEMA)
    first["evaluate"]["metrics"].append("f1")
    assert fill_defaults({}, SCHEMA)["evaluate"]["metrics"] == ["em", "f1", "coverage", "recall@5"]


def test_dates_stay_text(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL + "description: 2024-06-01\n"))
    assert spec.data["description"] == "2024-06-01"


def test_spec_is_immutable_all_the_way_down(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.data["name"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.models["llm"]["seed"] = 1  # type: ignore[index]
    assert isinstance(spec.query, tuple)
    assert isinstance(spec.evaluate["metrics"], tuple)
    assert hash(spec) == hash(load_spec(spec.path))
    assert spec == load_spec(spec.path)


def test_thaw_gives_plain_json_ready_data(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL))
    plain = thaw(spec.data)
    assert type(plain) is dict
    assert type(plain["query"]) is list
    assert type(plain["models"]["llm"]) is dict
    assert json.loads(json.dumps(plain, sort_keys=True)) == plain


def test_path_sha_and_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    path = write(tmp_path / "specs" / "deep", MINIMAL)
    spec = load_spec(path)
    assert spec.path == path.resolve()
    assert spec.root == tmp_path.resolve()
    assert spec.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_root_falls_back_to_spec_folder(tmp_path: Path) -> None:
    folder = tmp_path.resolve()
    if any((p / "pyproject.toml").is_file() or (p / ".git").exists() for p in folder.parents):
        pytest.skip("the temporary folder lies inside a project")
    assert load_spec(write(tmp_path, MINIMAL)).root == folder


def test_resolve_is_relative_to_the_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = load_spec(write(tmp_path / "specs", MINIMAL))
    folder = (tmp_path / "specs").resolve()
    assert spec.resolve(spec.corpus["path"]) == folder / "data" / "docs.jsonl"
    assert spec.resolve("../corpora/x") == tmp_path.resolve() / "corpora" / "x"
    assert spec.resolve("/abs/file") == Path("/abs/file")


def test_output_dir_inside_the_project(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    spec = load_spec(write(tmp_path / "specs", MINIMAL + "outputs: runs/out\n"))
    assert spec.output_dir == tmp_path.resolve() / "runs" / "out" / "demo"


@pytest.mark.parametrize("outputs", ["../../elsewhere", "/tmp/kgrag-elsewhere"])
def test_output_dir_escaping_the_project_is_refused(tmp_path: Path, outputs: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    spec = load_spec(write(project / "specs", MINIMAL + f"outputs: {outputs}\n"))
    with pytest.raises(KgragError, match="outputs path escapes the project"):
        _ = spec.output_dir


def test_tilde_in_outputs_is_the_home_folder(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As in every other path a spec names; a literal '~' folder would hide the runs."""
    (tmp_path / ".git").mkdir()
    spec = load_spec(write(tmp_path / "specs", MINIMAL + "outputs: ~/runs\n"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert spec.output_dir == tmp_path.resolve() / "home" / "runs" / "demo"
    monkeypatch.setenv("HOME", str(tmp_path.parent))
    with pytest.raises(KgragError, match=f"'~/runs' leads to {tmp_path.parent.resolve()}/runs/demo"):
        _ = spec.output_dir
    assert not (tmp_path / "~").exists()


def test_cache_dir_from_spec_env_or_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "env-cache"))
    configured = load_spec(write(tmp_path, MINIMAL + "cache:\n  dir: .cache\n"))
    assert configured.cache_dir == tmp_path.resolve() / ".cache"
    default = load_spec(write(tmp_path, MINIMAL, name="plain.yaml"))
    assert default.cache_dir == (tmp_path / "env-cache").resolve()
    monkeypatch.delenv("KGRAG_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default.cache_dir == (tmp_path / "home" / ".cache" / "kgrag").resolve()


def test_spec_can_be_built_directly(tmp_path: Path) -> None:
    data = fill_defaults({"name": "x", "corpus": {"dataset": "text", "path": "d"}}, SCHEMA)
    spec = Spec(path=tmp_path / "s.yaml", root=tmp_path, sha256="0" * 64, data=data)
    assert spec.output_dir == tmp_path.resolve() / "outputs" / "x"
