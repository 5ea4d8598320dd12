"""What a complete artefact holds, so that reusing it can first check it is still there.

An artefact folder is complete once renamed into place, but nothing stops a user,
a sync tool or a full disk from deleting or overwriting its files afterwards.
Reusing it then fails far from the cause (a LanceDB ``FileNotFoundError`` when a
question is asked), or worse, silently reports old results. So every artefact
lists its files in ``files.json`` (path, size, sha256), written just before the
rename, and the runner checks that listing on each reuse: a damaged artefact is
rebuilt, replaying its model calls from the cache, instead of reused.

A folder whose listing is gone is never taken on trust: listing it as it stands would
record any damage as the truth. Its files are read instead
(``kgrag.contents.readable``), and only a folder that reads whole is listed anew.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kgrag.contents.readable import unreadable
from kgrag.pipeline.artefacts import write_json_atomic

LISTING = "files.json"
# Files up to this size are hashed, larger ones checked by size only. Every run checks
# every artefact it reuses, so the check must stay cheap: a file at this limit hashes in
# a fraction of a second, and the files past it (the vector tables of large corpora)
# would cost seconds per reuse, while the damage seen in
# practice (a file deleted, truncated, or replaced by other content) changes the size.
HASH_LIMIT = 64 * 2**20


def file_listing(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file under ``folder`` but the listing itself, recursively (a LanceDB table
    is a folder): relative path → size and sha256 (None above ``HASH_LIMIT``)."""
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    return {name: _describe(files[name]) for name in sorted(files) if name != LISTING}


def write_listing(folder: Path) -> None:
    write_json_atomic(folder / LISTING, {"files": file_listing(folder)})


def damage(folder: Path) -> str | None:
    """The first way ``folder`` differs from its listing (a file missing, resized or
    changed), or None if it matches. Files added since are ignored: they cannot make
    reading the listed ones fail. A folder without a listing has nothing to compare
    with, so its files must read whole instead."""
    path = folder / LISTING
    if not path.exists():
        problem = unreadable(folder)
        return None if problem is None else f"{LISTING} missing and {problem}"
    try:
        files = dict(json.loads(path.read_text())["files"])
    except (ValueError, KeyError, TypeError):
        return f"{LISTING} unreadable"
    for name, listed in files.items():
        problem = _differs(folder / name, listed)
        if problem is not None:
            return f"{name} {problem}"
    return None


def check(folder: Path, found_whole: bool = False) -> str | None:
    """``damage`` for the runner, which holds the run's lock: a folder without a listing
    that reads whole is listed now, so that it is not read through again and later
    damage to it is caught like any other. ``found_whole``: the command found it whole
    (``damage``) just before taking the lock, so its files are not read through twice."""
    problem = None if found_whole else damage(folder)
    if problem is None and not (folder / LISTING).exists():
        write_listing(folder)
    return problem


def _describe(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    return {"size": size, "sha256": _sha256(path) if size <= HASH_LIMIT else None}


def _differs(path: Path, listed: dict[str, Any]) -> str | None:
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != listed["size"]:
        return f"is {size} bytes, listed as {listed['size']}"
    if listed["sha256"] is not None and _sha256(path) != listed["sha256"]:
        return "changed (its sha256 differs from the listing)"
    return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
