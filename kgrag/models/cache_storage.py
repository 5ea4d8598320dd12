"""How the call cache reports a failure of its database or of its folder.

A cache folder that cannot take writes (a full disk, a read-only folder) is not a
damaged cache: its entries are intact, and deleting them would throw paid calls away.
So sqlite's failures are told apart by their result code: only a database sqlite calls
corrupt is reported as damaged, with the advice to move it aside; a full or read-only
folder is reported as such, with the advice to make room or make it writable.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kgrag.errors import CAUSES, DENIED, KgragError, storage_cause

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
# What a folder that refuses a new file says, by errno.
_CAUSES = {**CAUSES, **DENIED, errno.ENOTDIR: "it is not a folder (or lies under a file)"}


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
        cause = cause or (None if code is None else UNWRITABLE.get(code))
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
    """Why sqlite could not open or write its database in ``folder`` (or in the nearest
    folder above it that exists), which it reports only as "unable to open database file"
    or "disk I/O error"; None when nothing is found. Creating a file there names the cause
    as the operating system sees it (permission denied, read-only, not a folder, a virtual
    file system like /proc that takes no files); a disk that still takes an empty file may
    have no block left for the database, which only a disk with blocks can say."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return None
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".kgrag-probe-")
    except OSError as exc:
        return ((None if exc.errno is None else _CAUSES.get(exc.errno))
                or f"it takes no new file: {(exc.strerror or str(exc)).lower()}")
    os.close(handle)
    os.unlink(probe)
    try:
        state = os.statvfs(existing)
    except OSError:
        return None
    if state.f_flag & os.ST_RDONLY:
        return _CAUSES[errno.EROFS]
    return _CAUSES[errno.ENOSPC] if state.f_blocks and not state.f_bavail else None
