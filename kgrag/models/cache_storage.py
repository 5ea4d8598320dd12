"""How the call cache reports a failure of its database or of its folder.

A cache folder that cannot take writes (a full disk, a read-only folder) is not a
damaged cache: its entries are intact, and deleting them would throw paid calls away.
So sqlite's failures are told apart by their result code: only a database sqlite calls
corrupt is reported as damaged, with the advice to move it aside; a full or read-only
folder is reported as such, with the advice to make room or make it writable.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kgrag.errors import KgragError, storage_cause

# sqlite's primary result codes for a database file that is itself broken ...
DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
# ... and for one that is sound but cannot be written or opened where it lies.
UNWRITABLE = {
    sqlite3.SQLITE_FULL: "no space left on its disk",
    sqlite3.SQLITE_READONLY: "it cannot be written (a read-only folder or file system)",
    sqlite3.SQLITE_CANTOPEN: "its database file cannot be opened for writing",
    sqlite3.SQLITE_PERM: "permission denied",
    sqlite3.SQLITE_IOERR: "the disk failed a read or a write (an I/O error)",
}


@contextmanager
def storing(directory: Path) -> Iterator[None]:
    """Any failure of the database or of its folder, as one ``KgragError`` that says
    whether the database is damaged or its folder cannot take writes."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        code = None if code is None else code & 0xFF  # the primary of an extended code
        if code in DAMAGED:
            raise KgragError(f"the model-call cache at {directory} is damaged ({exc}); "
                             "move or delete that folder (its calls will be recomputed)"
                             ) from exc
        cause = None if code == sqlite3.SQLITE_FULL else _file_system_state(directory)
        cause = cause or UNWRITABLE.get(code)
        if cause is None:  # neither damage nor a disk problem: say only what sqlite said
            raise KgragError(f"cannot use the model-call cache at {directory}: "
                             f"{exc} ({getattr(exc, 'sqlite_errorname', 'sqlite')})") from exc
        raise _unusable(directory, cause, exc) from exc
    except OSError as exc:
        cause = storage_cause(exc, directory)
        if cause is None:
            raise
        raise _unusable(directory, cause, exc) from exc


def _unusable(directory: Path, cause: str, exc: Exception) -> KgragError:
    return KgragError(
        f"cannot write the model-call cache at {directory}: {cause} ({exc}). This is "
        "no damage to the cache: its entries keep the calls already paid, so do not "
        "delete it; free space on its disk or make the folder writable (or point "
        "KGRAG_CACHE_DIR, or the spec's cache.dir, at another folder), then run again")


def _file_system_state(folder: Path) -> str | None:
    """Whether the file system of ``folder`` (or of the nearest folder above it that
    exists) is read-only or has no block left, which sqlite reports only as "unable to
    open database file" or "disk I/O error"; None if neither."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    try:
        state = os.statvfs(existing) if existing is not None else None
    except OSError:
        return None
    if state is None:
        return None
    if state.f_flag & os.ST_RDONLY:
        return "it is on a read-only file system"
    return "no space left on its disk" if state.f_bavail == 0 else None
