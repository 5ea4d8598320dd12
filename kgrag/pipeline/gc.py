"""Outputs that do not pile up: the folders of a run that its spec no longer reads.

Every change to a spec that changes a fingerprint leaves the old artefact folder behind
(``<step>-<fingerprint12>``), because the runner never deletes a complete artefact: an
edit undone finds it again. Over an afternoon of edits they add up. ``collect`` lists
what the current plan does not read, and removes it unless asked only to list:

* artefact folders whose name is no step of the current plan (superseded);
* resume folders of such steps (a long step's state while it ran, ``.resume-…``);
* temporary folders and files of killed runs (``.tmp-…``), which the next run would
  delete anyway.

It never removes what the current plan reads (every step's artefact, every strategy's
retrieval, a step's resume folder with the ``.next`` copy a killed save leaves); nor a
folder another spec of the project names by path (a trained embedder or Graph-LLM one
spec reads from another's run, found by the folder's path in the spec's text, comments
included); nor what the plan of another spec writing the same run folder reads; nor
anything else in the run folder (manifest, metrics, report, lock). The call cache is
elsewhere and untouched. The run folder's lock is held throughout, so no run is writing
there while it is judged.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kgrag.configuration import resolve_path
from kgrag.errors import KgragError
from kgrag.pipeline.artefacts import TEMP_PREFIX, run_lock
from kgrag.steps.step import RESUME_PREFIX

ARTEFACT = re.compile(r"[^.].*-[0-9a-f]{12}")
RESUME = re.compile(re.escape(RESUME_PREFIX) + r"(?P<artefact>.+-[0-9a-f]{12})(\.next)?")
SPEC_SUFFIXES = (".yaml", ".yml")
# what ends a path written in YAML, before it: blanks, quotes, flow brackets and commas
PATH_START = re.compile(r"""[^\s'"{}\[\],]*$""")

SUPERSEDED = "superseded"
RESUME_STATE = "resume state of a superseded step"
KILLED = "left by a killed run"


@dataclass(frozen=True)
class Leftover:
    """A folder (or stray temp file) of the run folder that nothing reads, its size in
    bytes and why it is there."""

    path: Path
    size: int
    why: str


@dataclass(frozen=True)
class Collection:
    """What ``collect`` found: the leftovers, whether they were removed, and the folders
    the plan does not read but other specs need (folder → those specs)."""

    run_dir: Path
    leftovers: list[Leftover] = field(default_factory=list)
    removed: bool = False
    kept: dict[str, list[Path]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(leftover.size for leftover in self.leftovers)


def collect(run_dir: Path, reads: set[str], specs: Iterable[Path],
            shared: dict[str, list[Path]] | None = None, *, dry_run: bool = False
            ) -> Collection:
    """The folders of ``run_dir`` that neither the current plan (``reads``: the names of
    the artefact folders it reads), nor another spec writing the same run folder
    (``shared``: folder → those specs), nor the text of any of ``specs`` names; removed
    unless ``dry_run``. A run folder another run holds is refused by its lock."""
    if not run_dir.is_dir():
        return Collection(run_dir)
    with run_lock(run_dir):
        needed = named_folders(run_dir, specs)
        for folder, others in (shared or {}).items():
            needed.setdefault(folder, []).extend(others)
        found = [Leftover(path, size_of(path), why)
                 for path, why in _unread(run_dir, reads | set(needed))]
        if not dry_run:
            for leftover in found:
                _remove(leftover.path)
    kept = {name: others for name, others in sorted(needed.items())
            if name not in reads and (run_dir / name).exists()}
    return Collection(run_dir, found, not dry_run, kept)


def _unread(run_dir: Path, kept: set[str]) -> Iterator[tuple[Path, str]]:
    """Each entry of the run folder that is an artefact, resume or temp folder nothing
    keeps, with why it is there."""
    for path in sorted(run_dir.iterdir()):
        name = path.name
        if name.startswith(TEMP_PREFIX):
            yield path, KILLED
        elif path.is_dir() and not path.is_symlink():
            resume = RESUME.fullmatch(name)
            if resume is not None and resume["artefact"] not in kept:
                yield path, RESUME_STATE
            elif resume is None and ARTEFACT.fullmatch(name) and name not in kept:
                yield path, SUPERSEDED


def named_folders(run_dir: Path, specs: Iterable[Path]) -> dict[str, list[Path]]:
    """Folder of ``run_dir`` → the spec files whose text names a path into it (in a key
    or a comment, relative to the spec or absolute): what another spec reads."""
    names = {path.name for path in run_dir.iterdir() if ARTEFACT.fullmatch(path.name)}
    found: dict[str, list[Path]] = {}
    for spec in specs:
        try:
            text = spec.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # not a spec anyone can run
        for name in names:
            if _names(text, name, spec, run_dir / name):
                found.setdefault(name, []).append(spec)
    return found


def _names(text: str, name: str, spec: Path, folder: Path) -> bool:
    """Whether ``text`` holds a path that resolves to ``folder`` (whose last part is
    ``name``), followed by the end of the path or a ``/``."""
    for match in re.finditer(re.escape(name) + r"(?![\w.-])", text):
        start = PATH_START.search(text, 0, match.start())
        assert start is not None, "PATH_START matches the empty string at worst"
        written = start[0] + name
        try:
            if resolve_path(written, spec.parent, spec) == folder.resolve():
                return True
        except KgragError:
            continue
    return False


def spec_files(root: Path, outputs: Path) -> list[Path]:
    """The YAML files of the project at ``root``: its specs, wherever they sit, outside
    hidden folders (``.git``, ``.venv``) and the outputs folder."""
    found = []
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(s for s in subfolders
                               if not s.startswith(".") and here / s != outputs)
        found += [here / f for f in sorted(files) if f.endswith(SPEC_SUFFIXES)]
    return found


def size_of(path: Path) -> int:
    """Bytes of the files under ``path`` (or of the file), links not followed."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size
    return sum((Path(folder) / f).lstat().st_size
               for folder, _, files in os.walk(path) for f in files)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
