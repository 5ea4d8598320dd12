"""The typed, immutable pipeline configuration: a validated spec, and the paths it names.

A ``Spec`` is built once from a validated file and then passed everywhere, so
it is frozen all the way down: a stage cannot change the configuration another
stage (or a cache key) relies on.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from kgrag.errors import KgragError

NAME_MAX = 255
"""Bytes in one file or folder name on the file systems kgrag runs on (ext4, XFS, APFS)."""


def freeze(obj: Any) -> Any:
    """Return a deeply read-only copy: dicts become mapping proxies, lists tuples."""
    if isinstance(obj, Mapping):
        return MappingProxyType({key: freeze(value) for key, value in obj.items()})
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(item) for item in obj)
    return obj


def thaw(obj: Any) -> Any:
    """Return plain dicts and lists again, e.g. to dump a config to JSON for hashing."""
    if isinstance(obj, Mapping):
        return {key: thaw(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [thaw(item) for item in obj]
    return obj


def find_root(folder: Path) -> Path:
    """Return the nearest folder at or above ``folder`` holding pyproject.toml or .git.

    Outputs are placed relative to this root, so that runs land in the project
    no matter where the spec sits; without a marker the folder itself is used.
    """
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
            return candidate
    return folder


def resolve_path(relative: str | Path, base_dir: Path, origin: Path) -> Path:
    """Resolve a path a spec names against ``base_dir`` (the spec file's folder).

    Specs name their data relative to themselves so a project can be moved or checked
    out anywhere; absolute paths and ``~`` are honoured. ``origin`` (the spec file)
    names where the path came from in an error.
    """
    try:
        expanded = Path(relative).expanduser()
    except RuntimeError:  # ~user of no known user, or ~ without a home
        raise KgragError(
            f"{origin}: {str(relative)!r}: cannot find the home folder '~' refers to"
        ) from None
    return resolved(base_dir / expanded, f"{origin}: {str(relative)!r}")


def resolved(path: Path, what: str) -> Path:
    """``path.resolve()``, or a ``KgragError`` that starts with ``what`` (where the path
    came from) when symbolic links on the way loop back on themselves: Python raises
    that as a ``RuntimeError``, a traceback to the user."""
    try:
        return path.resolve()
    except RuntimeError as exc:
        raise KgragError(f"{what}: symbolic links loop back on themselves ({exc})") from None


@dataclass(frozen=True)
class Spec:
    """A validated pipeline spec with every default filled in."""

    path: Path
    """Absolute path of the spec file."""
    root: Path
    """Project root (see ``find_root``)."""
    sha256: str
    """SHA-256 of the spec file bytes, to tie artefacts to the spec that made them."""
    data: Mapping[str, Any] = field(hash=False)
    """The validated configuration; read-only mappings and tuples all the way down. The schema
    fixed each section's shape, so the properties below state it (``cast``) rather than test it."""

    @property
    def name(self) -> str:
        """The run name."""
        return cast("str", self.data["name"])

    @property
    def corpus(self) -> Mapping[str, Any]:
        """Where documents and questions come from."""
        return cast("Mapping[str, Any]", self.data["corpus"])

    @property
    def models(self) -> Mapping[str, Any]:
        """The LLM and embedder settings."""
        return cast("Mapping[str, Any]", self.data["models"])

    @property
    def dense_index(self) -> Mapping[str, Any]:
        """How the dense index of chunks is searched (an ANN index past a size)."""
        return cast("Mapping[str, Any]", self.data["dense_index"])

    @property
    def chunking(self) -> Mapping[str, Any]:
        """Chunk size and overlap."""
        return cast("Mapping[str, Any]", self.data["chunking"])

    @property
    def graphs(self) -> tuple[Mapping[str, Any], ...]:
        """The graph builds, in spec order."""
        return cast("tuple[Mapping[str, Any], ...]", self.data["graphs"])

    @property
    def extraction(self) -> Mapping[str, Any]:
        """LLM extraction settings shared by every skeleton build."""
        return cast("Mapping[str, Any]", self.data["extraction"])

    @property
    def training(self) -> tuple[Mapping[str, Any], ...]:
        """The retrievers to train, in spec order."""
        return cast("tuple[Mapping[str, Any], ...]", self.data["training"])

    @property
    def query(self) -> tuple[Mapping[str, Any], ...]:
        """The query strategies, in spec order."""
        return cast("tuple[Mapping[str, Any], ...]", self.data["query"])

    @property
    def answer(self) -> Mapping[str, Any]:
        """Answer generation settings."""
        return cast("Mapping[str, Any]", self.data["answer"])

    @property
    def evaluate(self) -> Mapping[str, Any]:
        """Metric settings."""
        return cast("Mapping[str, Any]", self.data["evaluate"])

    @property
    def executor(self) -> Mapping[str, Any]:
        """Where model calls over many work items run (``kgrag.models.executor``)."""
        return cast("Mapping[str, Any]", self.data["executor"])

    def resolve(self, relative: str | Path) -> Path:
        """Resolve a path from the spec against the spec file's folder."""
        return resolve_path(relative, self.path.parent, self.path)

    @property
    def output_dir(self) -> Path:
        """``<root>/<outputs>/<name>`` (``~`` in ``outputs`` is the home folder, as in every
        path a spec names); refuses a location outside the project, or one that cannot be
        a folder.

        Runs write and replace files there, so a typo like ``../../`` must not
        let them land in (or overwrite) somebody else's folder; and a file in the
        way must stop a run before its first step, not when that step is saved.
        """
        root = self.root.resolve()
        target = resolve_path(Path(self.data["outputs"]) / self.name, root, self.path)
        if not target.is_relative_to(root):
            raise KgragError(
                f"{self.path}: outputs path escapes the project: "
                f"{self.data['outputs']!r} leads to {target}, which is outside {root}"
            )
        problem = _folder_problem(root, target)
        if problem:
            raise KgragError(f"{self.path}: cannot make the run folder {target}: {problem}")
        return target

    @property
    def cache_dir(self) -> Path:
        """The model-call cache folder.

        Shared across specs by default (``$KGRAG_CACHE_DIR`` or ``~/.cache/kgrag``)
        so that a second spec reuses the calls the first one paid for.
        """
        configured = self.data["cache"]["dir"]
        return self.resolve(configured) if configured else default_cache_dir()

    def with_cache_dir(self, folder: Path) -> Spec:
        """This spec with its cache in ``folder``, whatever its ``cache.dir`` says: a replay
        keeps the conversions it caches, like its calls, in its own folder. The cache
        folder is in no fingerprint."""
        data = thaw(self.data)
        data["cache"] = {**data["cache"], "dir": str(folder)}
        return replace(self, data=freeze(data))


def _folder_problem(root: Path, target: Path) -> str | None:
    """Why ``target`` (under the folder ``root``) cannot be or become a folder, if it cannot."""
    parts = target.relative_to(root).parts
    for part in parts:  # checked here: the system says so only once the folders above exist
        if len(os.fsencode(part)) > NAME_MAX:
            return f"{_quote(part)} is longer than a file name may be ({NAME_MAX} bytes)"
    path = root
    for part in parts:
        path = path / part
        try:
            if not stat.S_ISDIR(path.stat().st_mode):
                return f"{path} is a file, not a folder"
        except FileNotFoundError:
            return None  # the run makes the rest
        except OSError as exc:
            return exc.strerror
    return None


def _quote(name: str) -> str:
    """A name for a message, shortened: it may be thousands of characters long."""
    return f"'{name}'" if len(name) <= 20 else f"'{name[:19]}…'"


def default_cache_dir() -> Path:
    """``$KGRAG_CACHE_DIR``, else ``~/.cache/kgrag``: the cache every spec shares by default."""
    from_env = os.environ.get("KGRAG_CACHE_DIR")
    if from_env:
        return resolved(Path(from_env).expanduser(), f"KGRAG_CACHE_DIR {from_env!r}")
    return resolved(Path.home() / ".cache" / "kgrag", "the default cache folder")
