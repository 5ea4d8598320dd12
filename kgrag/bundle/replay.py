"""``kgrag replay``: unpack a bundle into a folder of its own and check it can be replayed.

Before anything runs, the bundle's checksums are verified, the corpus is in place
(shipped, or given with ``--corpus`` and matched by sha256), and every model the spec
names resolves here to the sha256 the bundle was made with; the call cache is the
bundle's entries alone, and it is sealed, so a replay never calls a model. The run itself
and the comparison of its metrics with the bundle's are ``kgrag.api.replay``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.bundle.archive import INDEX, read_archive
from kgrag.bundle.pack import CALLS
from kgrag.errors import KgragError, writing
from kgrag.models.cache import CallCache
from kgrag.models.pipelines import resolve_pipeline
from kgrag.models.registry import ResolvedModel, resolve_embedder
from kgrag.models.served import resolve_llm_entry
from kgrag.pipeline.compile import source_sha256
from kgrag.spec import Spec, load_spec
from kgrag.spec.model import resolved

CACHE = "cache"
BATCH = 2000  # cache entries stored per transaction


@dataclass(frozen=True)
class Unpacked:
    """A bundle laid out in ``folder``: its index, the spec and project to run, the cache."""

    folder: Path
    index: dict[str, Any]
    members: dict[str, bytes]

    @property
    def project(self) -> Path:
        return self.folder / "project"

    @property
    def spec(self) -> Path:
        return self.folder / self.index["spec"]

    @property
    def cache_dir(self) -> Path:
        return self.folder / CACHE


def unpack(bundle: Path, folder: Path, corpora: Iterable[Path] = ()) -> Unpacked:
    """Verify ``bundle``, write it into ``folder`` (new, empty, or an earlier replay of the
    same bundle, which then resumes) and fill the sealed cache; raises ``KgragError``
    naming every missing corpus source and every model that is missing or differs."""
    index, members = read_archive(bundle)
    with writing(folder, f"the replay of {bundle.name}",
                 "free space there or make it writable (or choose another folder with --dir)"):
        _claim(folder, members[INDEX])
        for name, data in members.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    unpacked = Unpacked(folder, index, members)
    problems = _place_corpora(unpacked, list(corpora))
    spec = load_spec(unpacked.spec, unpacked.project)
    problems += _model_problems(spec, index["models"])
    if problems:
        raise KgragError(f"cannot replay {bundle}: " + "; ".join(problems))
    _fill_cache(unpacked)
    return unpacked


def _claim(folder: Path, index: bytes) -> None:
    """Refuse a folder holding anything but an earlier replay of this same bundle."""
    if folder.is_file():
        raise KgragError(f"{folder} is a file; replay unpacks into a folder")
    if folder.exists() and any(folder.iterdir()):
        earlier = folder / INDEX
        if not (earlier.is_file() and earlier.read_bytes() == index):
            raise KgragError(f"{folder} is not empty and holds no replay of this bundle; "
                             "choose another folder with --dir")
    folder.mkdir(parents=True, exist_ok=True)


def _place_corpora(unpacked: Unpacked, given: list[Path]) -> list[str]:
    """Copy each ``--corpus`` path to where the spec expects the source of the same sha256;
    the problems for sources that are neither shipped nor given."""
    problems = []
    hashes = {source_sha256(resolved(path, f"--corpus {path}"), f"--corpus {path}"): path
              for path in given}
    for source in unpacked.index["sources"]:
        target = unpacked.folder / source["member"]
        if source["copied"] or (target.exists() and
                                source_sha256(target, source["key"]) == source["sha256"]):
            continue
        path = hashes.get(source["sha256"])
        if path is None:
            problems.append(f"{source['key']} is not in the bundle (made with --no-corpus): "
                            f"give the {'folder' if source['folder'] else 'file'} of sha256 "
                            f"{source['sha256'][:16]}… with --corpus PATH")
        elif source["folder"]:
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return problems


def _model_problems(spec: Spec, recorded: dict[str, dict[str, Any]]) -> list[str]:
    """Each model of the spec that this machine lacks or holds in another version."""
    base = spec.path.parent
    llm = spec.models["llm"]["model"]
    wanted: dict[str, tuple[Callable[[], ResolvedModel], str]] = {
        "llm": (lambda: resolve_llm_entry(spec.models["llm"], base, "models.llm"), llm),
        "embedder": (lambda: resolve_embedder(spec.models["embedder"]["model"], base),
                     spec.models["embedder"]["model"])}
    extraction = spec.extraction["model"]
    if extraction not in (None, llm):
        wanted["extraction_llm"] = (
            lambda: resolve_llm_entry(extraction, base, "extraction.model"),
            extraction if isinstance(extraction, str) else extraction["model"])
    problems = []
    for role, (resolve, name) in wanted.items():
        if role not in recorded:  # the run used no such model (an LLM-free run)
            continue
        expected = recorded[role]["sha256"]
        try:  # a served model resolves to its declared identity: no server is contacted
            found = resolve()
        except KgragError as exc:
            problems.append(f"model {name} ({role}, sha256 {expected[:16]}…) is missing here: "
                            f"{exc}")
            continue
        if found.sha256 != expected:
            problems.append(f"model {name} ({role}) differs: the bundle was made with sha256 "
                            f"{expected[:16]}…, {found.path} has {found.sha256[:16]}…")
    if "pipeline" in recorded:
        expected_pipeline = {k: v for k, v in recorded["pipeline"].items() if k != "name"}
        name = spec.extraction["pipeline"]
        try:
            identity = resolve_pipeline(name, base).identity()
        except KgragError as exc:
            problems.append(f"spaCy pipeline {name} is missing here: {exc}")
        else:
            if identity != expected_pipeline:
                problems.append(f"spaCy pipeline {name} differs: the bundle was made with "
                                f"{expected_pipeline}, here it is {identity}")
    return problems


def _fill_cache(unpacked: Unpacked) -> None:
    """Store the bundle's call-cache entries in the replay's own cache."""
    cache = CallCache(unpacked.cache_dir)
    try:
        lines = unpacked.members[CALLS].decode().splitlines()
        for start in range(0, len(lines), BATCH):
            cache.set_many([tuple(json.loads(line)) for line in lines[start:start + BATCH]])
    finally:
        cache.close()
