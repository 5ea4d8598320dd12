"""A bundle file: a gzip-compressed tar of plain files, checked member by member.

The first member, ``bundle.json``, is the index: what the bundle holds and the sha256 of
every other member. The last, ``bundle.sha256``, is the sha256 of the index itself. The
gzip stream is read to its very end, so its own trailer (the CRC-32 and length of all it
holds) is checked too: a file cut short, even by its last byte, or changed anywhere
fails it, while the tar reader alone would stop at the archive's end marker and miss
damage past it. A member changed after packing no longer matches its checksum. (The
checksums find damage and tampering by hand; they are no signature against someone who
rewrites the index too.) It is an ordinary tar: ``tar tzf`` lists it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from kgrag.errors import KgragError

FORMAT = 1
INDEX = "bundle.json"
SEAL = "bundle.sha256"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_archive(path: Path, index: dict[str, Any], members: dict[str, bytes]) -> bytes:
    """Write ``members`` (name → bytes) under an index; returns the index as written.
    The file appears whole or not at all (written beside it, then renamed)."""
    index = {**index, "format": FORMAT,
             "files": {name: sha256(data) for name, data in sorted(members.items())}}
    head = (json.dumps(index, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    tmp = path.with_name(f".tmp-{path.name}")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for name, data in [(INDEX, head), *sorted(members.items()),
                               (SEAL, sha256(head).encode())]:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise KgragError(f"cannot write the bundle {path}: {exc.strerror or exc}") from None
    return head


def read_archive(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The index and the members of a bundle (index and seal included), every checksum
    verified; a damaged, truncated or altered bundle is one ``KgragError``."""
    members: dict[str, bytes] = {}
    try:
        with gzip.open(path, "rb") as stream, tarfile.open(fileobj=stream, mode="r:") as tar:
            for info in tar:
                handle = tar.extractfile(info) if info.isfile() else None
                if handle is None:
                    raise KgragError(f"bundle {path} holds {info.name!r}, which is not a plain "
                                     "file; it was not made by kgrag bundle")
                members[info.name] = handle.read()
            while stream.read(2**20):  # to the gzip trailer, which checks the CRC and length
                pass
    except FileNotFoundError:
        raise KgragError(f"bundle {path} does not exist") from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise KgragError(f"bundle {path} is truncated or damaged ({exc}); copy it again or "
                         "make it again with kgrag bundle") from None
    if INDEX not in members:
        raise KgragError(f"{path} is not a kgrag bundle (it holds no {INDEX})")
    if members.get(SEAL, b"").decode(errors="replace") != sha256(members[INDEX]):
        raise _altered(path, INDEX)
    index = json.loads(members[INDEX])
    if index.get("format") != FORMAT:
        raise KgragError(f"bundle {path} has format {index.get('format')!r}; this kgrag reads "
                         f"format {FORMAT}")
    files = index["files"]
    for name in sorted(set(members) - {INDEX, SEAL} | set(files)):
        if name not in files or name not in members or sha256(members[name]) != files[name]:
            raise _altered(path, name)
        if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts:
            raise KgragError(f"bundle {path} names a file outside its folder: {name!r}")
    return index, members


def _altered(path: Path, member: str) -> KgragError:
    return KgragError(f"bundle {path} is damaged or was altered: {member} does not match its "
                      "checksum; copy it again or make it again with kgrag bundle")
