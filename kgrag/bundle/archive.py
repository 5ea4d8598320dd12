"""A bundle file: a gzip-compressed tar of plain files, checked member by member.

The first member, ``bundle.json``, is the index: what the bundle holds and the sha256 of
every other member. The last, ``bundle.sha256``, is the sha256 of the index itself. The
gzip stream is read to its very end, so its own trailer (the CRC-32 and length of all it
holds) is checked too: a file cut short, even by its last byte, or changed anywhere
fails it, while the tar reader alone would stop at the archive's end marker and miss
damage past it. A member changed after packing no longer matches its checksum. (The
checksums find damage and tampering by hand; they are no signature against someone who
rewrites the index too.) It is an ordinary tar: ``tar tzf`` lists it.

What no checksum covers is refused by its form: the gzip header is written without a
file name or time, so it is always the same ten bytes (``GZIP_HEADER``); a second gzip
stream after the first (two bundles joined) is refused; and a member the index does not
list is refused by its tar header, before a byte of it is read, so a crafted bundle
cannot make the replay read a gigabyte it will refuse anyway. A listed member is bounded
by its header too: the members' sizes together may not pass ``MAX_INFLATION`` times the
bundle file's size (plus ``INFLATION_ROOM`` for a small bundle's tar padding), so a
member that inflates a few kilobytes into gigabytes (a bomb), or whose header claims
more than the file holds, is refused before it is read into memory or written. kgrag's
own bundles unpack to 3 to 5 times their size.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import tarfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from kgrag.errors import KgragError

FORMAT = 1
INDEX = "bundle.json"
SEAL = "bundle.sha256"
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, time 0, level 9
# Bundles written before the header was fixed carry the tar's file name (and a time, which
# nothing checks): the name is printable ASCII, so a byte flipped in it is found.
NAMED_HEADER = re.compile(rb"\x1f\x8b\x08\x08....[\x00\x02\x04]\xff[\x20-\x7e]+\x00", re.DOTALL)
MAX_INDEX_BYTES = 64 * 2**20  # about 100 bytes a listed file: over half a million files
MAX_INFLATION = 64  # members' bytes per byte of the bundle file, at most (deflate: ~1000)
INFLATION_ROOM = 16 * 2**20  # bytes a bundle may unpack to beyond that, however small
CHUNK = 2**20


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
        with (open(tmp, "wb") as raw,
              gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw,
                            mtime=0) as packed,
              tarfile.open(fileobj=packed, mode="w") as tar):
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


class _Inflated:
    """The one gzip stream of a file, read as the tar reader asks (``read``), its
    trailer checked by zlib; ``finish`` reads it to its end and refuses anything after."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self.ready = bytearray()

    def read(self, size: int) -> bytes:
        while len(self.ready) < size and not self.inflate.eof:
            compressed = self.inflate.unconsumed_tail or self.raw.read(CHUNK)
            if not compressed:
                raise EOFError("the file ends inside its compressed data")
            self.ready += self.inflate.decompress(compressed, CHUNK)
        data = bytes(self.ready[:size])
        del self.ready[:size]
        return data

    def finish(self) -> None:
        while self.read(CHUNK):
            pass
        if self.inflate.unused_data or self.raw.read(1):
            raise EOFError("data follows the end of its gzip stream: two files joined?")


def read_archive(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The index and the members of a bundle (index and seal included), every checksum
    verified; a damaged, truncated or altered bundle is one ``KgragError``."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(4096)
            if not (head.startswith(GZIP_HEADER) or NAMED_HEADER.match(head)):
                raise _damaged(path, "its gzip header is not the one kgrag bundle writes")
            raw.seek(0)
            room = INFLATION_ROOM + MAX_INFLATION * os.fstat(raw.fileno()).st_size
            stream = _Inflated(raw)
            # typeshed asks every fileobj for write, seek and tell; tarfile only reads a stream's
            with tarfile.open(  # type: ignore[call-overload]  # a "r|" stream: read() is enough
                    fileobj=stream, mode="r|") as tar:
                index, members = _members(path, tar, room)
            stream.finish()
    except FileNotFoundError:
        raise KgragError(f"bundle {path} does not exist") from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise _damaged(path, str(exc)) from None
    if members.get(SEAL, b"").decode(errors="replace") != sha256(members[INDEX]):
        raise _altered(path, INDEX)
    if index.get("format") != FORMAT:
        raise KgragError(f"bundle {path} has format {index.get('format')!r}; this kgrag reads "
                         f"format {FORMAT}")
    files = index["files"]
    for name in sorted(set(members) - {INDEX, SEAL} | set(files)):
        if name not in files or name not in members or sha256(members[name]) != files[name]:
            raise _altered(path, name)
        if not inside(name):
            raise KgragError(f"bundle {path} names a file outside its folder: {name!r}")
    return index, members


def inside(name: str) -> bool:
    """Whether a name in a bundle is a plain relative path that stays in the folder it
    is unpacked in: no ``..``, no leading ``/``, nothing ``normpath`` would change."""
    return (name not in ("", ".") and "\0" not in name and not name.startswith("/")
            and posixpath.normpath(name) == name and ".." not in name.split("/"))


def _members(path: Path, tar: tarfile.TarFile, room: int
             ) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The index and every member's bytes, in the order written: the index first (read
    at once, for its list of files), the seal last; each member checked by its tar
    header before it is read, the members' sizes together at most ``room`` bytes."""
    index: dict[str, Any] | None = None
    members: dict[str, bytes] = {}
    unpacked = 0
    for info in tar:
        if index is None and info.name != INDEX:
            raise KgragError(f"{path} is not a kgrag bundle (it does not start with {INDEX})")
        if not info.isfile():
            raise KgragError(f"bundle {path} holds {info.name!r}, which is not a plain "
                             "file; it was not made by kgrag bundle")
        if SEAL in members or info.name in members:
            raise _altered(path, info.name, "comes twice, or after the seal")
        limit = {INDEX: MAX_INDEX_BYTES, SEAL: 64}.get(info.name)
        if limit is None and (index is None or info.name not in index["files"]):
            raise _altered(path, info.name, f"is not listed in {INDEX}")
        if limit is not None and info.size > limit:
            raise _altered(path, info.name, f"is {info.size} bytes, more than {limit}")
        unpacked += info.size
        if unpacked > room:
            raise _altered(path, info.name, f"is {info.size:,} bytes, more than a bundle of "
                                            f"{path.stat().st_size:,} bytes unpacks to (at "
                                            f"most {room:,} bytes in all: {MAX_INFLATION} "
                                            f"times its size, and {INFLATION_ROOM:,} more)")
        handle = tar.extractfile(info)
        assert handle is not None  # a plain file
        members[info.name] = handle.read()
        if index is None:
            index = _index(path, members[INDEX])
    if index is None:
        raise KgragError(f"{path} is not a kgrag bundle (it holds no {INDEX})")
    return index, members


def _index(path: Path, head: bytes) -> dict[str, Any]:
    """The index, as far as reading the archive needs it: an object whose ``files``
    maps names to checksums."""
    try:
        index = json.loads(head.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deeply
        raise _altered(path, INDEX, f"is not JSON text ({exc})") from None
    files = index.get("files") if isinstance(index, dict) else None
    if not (isinstance(files, dict) and all(isinstance(v, str) for v in files.values())):
        raise _altered(path, INDEX, "is no index: it must be an object whose 'files' maps "
                                    "each member's name to its sha256")
    return index


def _damaged(path: Path, why: str) -> KgragError:
    return KgragError(f"bundle {path} is truncated or damaged ({why}); copy it again or make "
                      "it again with kgrag bundle")


def _altered(path: Path, member: str, why: str = "does not match its checksum") -> KgragError:
    return KgragError(f"bundle {path} is damaged or was altered: {member} {why}; copy it "
                      "again or make it again with kgrag bundle")
