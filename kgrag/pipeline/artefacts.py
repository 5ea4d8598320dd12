"""Artefact folders, written atomically.

Each step writes into a temporary folder beside its final place and renames
it into ``<run>/<step>-<fingerprint12>/`` only once complete. An interrupted
run therefore leaves only finished artefacts (plus stale temp folders, which
the next run deletes), and resuming is just "reuse what exists".
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from kgrag.errors import KgragError

TEMP_PREFIX = ".tmp-"
# Inside every artefact folder: the sorted keys of every call-cache entry the step read or
# wrote, so that a bundle of the run ships exactly the calls a replay will ask for.
CALLS_RECORD = "calls.json"


def artefact_dir(run_dir: Path, step_name: str, fingerprint: str) -> Path:
    return run_dir / f"{step_name}-{fingerprint[:12]}"


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temp folder that becomes ``final`` only if the block completes."""
    tmp = final.parent / f"{TEMP_PREFIX}{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():  # --force: the old artefact is replaced only by a complete new one
        shutil.rmtree(final)
    os.replace(tmp, final)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole, or what it held before: a write that fails (a
    full disk) leaves neither a part of the file nor its temp file behind."""
    tmp = path.with_name(f"{TEMP_PREFIX}{path.name}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_stale_temps(run_dir: Path) -> None:
    """Delete temp folders left by an interrupted run (their work was incomplete)."""
    for tmp in run_dir.glob(f"{TEMP_PREFIX}*"):
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on a run folder; a second run fails fast with a clear message."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(run_dir / ".lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise KgragError(
            f"{run_dir} is locked by another kgrag run; wait for it to finish "
            "(or stop it) and try again"
        ) from None
    try:
        yield
    finally:
        lock.release()
