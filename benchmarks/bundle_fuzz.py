"""Fuzz ``kgrag replay``: each seeded mutant of a real bundle must replay, or be refused
with one ``kgrag: error:`` line and exit 2, and never write outside its replay folder.

    python benchmarks/spec_fuzz.py --kind bundles --mutants 1000 --seed 0

A tiny run (two MuSiQue questions, the stand-in LLM of the tests) is bundled once with
``kgrag bundle``. Each mutant changes that bundle once, the way someone who rewrites it
would: the index (a key deleted, a value of another type, a path that leads elsewhere,
an index that is no JSON object, not UTF-8, nested thousands deep or cut short), the
call cache's lines, a member's bytes, or the file itself (a byte flipped, cut short,
joined to itself or to garbage). Index and member mutations are forged: the checksums
and the seal are brought up to date, so only the replay's own checks stand in the way.
Each mutant is replayed into a folder of its own inside a fresh parent; a file that
appears in the parent beside the replay folder, a traceback, an exit code other than
0 or 2, an error of more than one line (but a refused spec's, one line per finding of
its validation), or a replay still running after ``--limit``
seconds is a failure.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import Tally
from mutants import report as mutants_report

from kgrag.bundle.archive import INDEX, SEAL
from kgrag.cli import main as kgrag_main
from tests.conftest import make_project, write_spec
from tests.standin import RuleLLM, run_with

Json = Any
Entries = dict[str, bytes]
SECTIONS = {"corpus": {"dataset": "musique", "path": "../corpus.jsonl", "limit": 2},
            "query": [{"name": "dense", "strategy": "naive", "budget_tokens": 300}],
            "answer": {"questions": 2}}
ELSEWHERE = ("../../../../elsewhere/SLIP.jsonl", "/tmp/kgrag-fuzz-abs", "project/../../x",
             "", ".", "project/", "project/./specs/../../../y", "\\..\\..\\z", "project/\x00",
             "x" * 5000, "project/specs/tiny.yaml/inner")
VALUES: tuple[Json, ...] = (None, 0, -1, 2**70, 1.5, float("inf"), True, "", "text", [],
                            {}, [1, 2], {"a": 1}, "\udc80", 10**400)


def made_bundle(folder: Path) -> Path:
    """A finished tiny run bundled by ``kgrag bundle``."""
    project = make_project(folder / "proj")
    spec = write_spec(project, **SECTIONS, cache={"dir": "../calls"})
    run_with(spec, RuleLLM())
    bundle = folder / "tiny.tar.gz"
    with redirect_stdout(io.StringIO()):
        if kgrag_main(["bundle", str(spec), "-o", str(bundle)]) != 0:
            raise SystemExit("kgrag bundle failed on the tiny run")
    return bundle


def entries_of(bundle: Path) -> tuple[Json, Entries]:
    with tarfile.open(bundle) as tar:
        entries = {info.name: _read(tar, info) for info in tar}
    index = json.loads(entries.pop(INDEX))
    del entries[SEAL]
    return index, entries


def _read(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    member = tar.extractfile(info)
    if member is None:
        raise SystemExit(f"{info.name} in the made bundle is not a file")
    return member.read()


def packed(head: bytes, entries: Entries) -> bytes:
    """A bundle of ``head`` as its index and ``entries``, sealed, gzip'd as kgrag does."""
    raw = io.BytesIO()
    with (gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out,
          tarfile.open(fileobj=out, mode="w") as tar):
        for name, data in [(INDEX, head), *entries.items(),
                           (SEAL, hashlib.sha256(head).hexdigest().encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def forged(index: Json, entries: Entries) -> bytes:
    """The index with its checksums brought up to date, as a forger would."""
    if isinstance(index, dict) and isinstance(index.get("files"), dict):
        index["files"] = {name: hashlib.sha256(data).hexdigest()
                          for name, data in entries.items()}
    return packed(json.dumps(index).encode(), entries)


def paths(data: Json, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path into ``data`` (the root excluded)."""
    items = data.items() if isinstance(data, dict) else (
        enumerate(data) if isinstance(data, list) else ())
    for key, value in items:
        yield (*path, key)
        yield from paths(value, (*path, key))


def parent_of(data: Json, path: tuple[Any, ...]) -> Json:
    for key in path[:-1]:
        data = data[key]
    return data


def delete_key(index: Json, entries: Entries, rng: random.Random) -> bytes:
    path = rng.choice([p for p in paths(index) if isinstance(parent_of(index, p), dict)])
    del parent_of(index, path)[path[-1]]
    return forged(index, entries)


def other_type(index: Json, entries: Entries, rng: random.Random) -> bytes:
    path = rng.choice(list(paths(index)))
    parent_of(index, path)[path[-1]] = rng.choice(VALUES)
    head = json.dumps(index).encode("utf-8", "surrogatepass")
    return packed(head, entries)


def elsewhere(index: Json, entries: Entries, rng: random.Random) -> bytes:
    """A place in the index (the spec, a source's member or path, a listed file) that
    leads out of the bundle's project folder, or nowhere a file system takes."""
    place = rng.choice(ELSEWHERE)
    where = rng.choice(("spec", "member", "file"))
    if where == "spec":
        index["spec"] = place
    elif where == "member":
        rng.choice(index["sources"])["member"] = place
        if rng.random() < 0.5:
            rng.choice(index["sources"])["copied"] = False
    else:
        entries[place] = b"planted\n"
    return forged(index, entries)


def not_an_object(index: Json, entries: Entries, rng: random.Random) -> bytes:
    text = json.dumps(index).encode()
    head = rng.choice((b"[]", b'"index"', b"null", b"42", json.dumps([index]).encode(),
                       text[: rng.randrange(1, len(text))], b"\xff\xfe" + text,
                       b"[" * 100_000 + b"]" * 100_000, text.replace(b"{", b"{\n", 1) + b"}"))
    return packed(head, entries)


def calls_line(index: Json, entries: Entries, rng: random.Random) -> bytes:
    lines = entries["calls.jsonl"].splitlines()
    line = rng.choice((b"not json", b'["only a key"]', b"[1, {}]", b'["k", "v"]', b"{}",
                       b"\xff", b"[" * 50_000, b'["k", {"text": 5}]', b""))
    lines.insert(rng.randrange(len(lines) + 1), line)
    entries["calls.jsonl"] = b"\n".join(lines) + b"\n"
    return forged(index, entries)


def member_bytes(index: Json, entries: Entries, rng: random.Random) -> bytes:
    name = rng.choice(sorted(entries))
    data = bytearray(entries[name])
    choice = rng.randrange(3)
    if choice == 0 and data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif choice == 1:
        data = data[: rng.randrange(len(data) + 1)]
    else:
        data = bytearray(os.urandom(rng.randrange(1, 4096)))
    entries[name] = bytes(data)
    return forged(index, entries)


def file_bytes(index: Json, entries: Entries, rng: random.Random) -> bytes:
    """The bundle file itself damaged, not forged: checksums and seal as they were."""
    whole = bytearray(forged(index, entries))
    choice = rng.randrange(4)
    if choice == 0:
        whole[rng.randrange(len(whole))] ^= 1 << rng.randrange(8)
    elif choice == 1:
        whole = whole[: rng.randrange(len(whole))]
    elif choice == 2:
        whole = whole + whole
    else:
        whole = whole + os.urandom(rng.randrange(1, 512))
    return bytes(whole)


MUTATIONS: tuple[Callable[[Json, Entries, random.Random], bytes], ...] = (
    delete_key, other_type, elsewhere, not_an_object, calls_line, member_bytes, file_bytes)


def outcome(bundle: Path, parent: Path) -> str:
    """"replayed" (exit 0) or "refused" (exit 2 with one error line); raises on anything
    else, or when a file appeared in ``parent`` beside the replay folder."""
    folder = parent / "replay"
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = kgrag_main(["replay", str(bundle), "--dir", str(folder)])
    stray = sorted(p.name for p in parent.iterdir() if p.name not in ("replay", bundle.name))
    if stray:
        raise AssertionError(f"wrote outside the replay folder: {stray}")
    message = err.getvalue()
    if "Traceback" in message:
        raise AssertionError(f"printed a traceback:\n{message[-2000:]}")
    if code == 0:
        return "replayed"
    if code == 2 and message.startswith("kgrag: error:") and (
            message.count("\n") == 1 or _findings(message)):
        return "refused"
    raise AssertionError(f"exit {code} with {message[:500]!r}")


def _findings(message: str) -> bool:
    """A spec refused by validation: one ``file:line: problem`` line per finding."""
    first, *rest = message.removeprefix("kgrag: error: ").splitlines()
    return all(line.split(":", 2)[0] == first.split(":", 2)[0] for line in rest)


OUTCOMES = ("replayed", "refused", "failed", "hung")


def fuzz(mutants: int, seed: int, limit: float, echo: Callable[[str], None] = print) -> Tally:
    """Run ``mutants`` bundle mutants."""
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="kgrag-bundle-fuzz-") as tmp:
        root = Path(tmp)
        os.environ["KGRAG_CACHE_DIR"] = str(root / "default-cache")  # not the user's
        os.environ["HOME"] = str(root / "home")
        bundle = made_bundle(root / "made")
        for number in range(mutants):
            rng = random.Random(f"{seed}:{number}")
            index, entries = entries_of(bundle)
            mutation = rng.choice(MUTATIONS)
            tally.applied[mutation.__name__] += 1
            parent = root / f"m{number}"
            parent.mkdir()
            mutant = parent / "mutant.tar.gz"
            mutant.write_bytes(mutation(index, entries, rng))
            tally.judge(f"#{number} ({mutation.__name__})",
                        functools.partial(outcome, mutant, parent), limit)
            shutil.rmtree(parent)
            tally.every_hundred(number, echo)
    return tally


def report(mutants: int, seed: int, limit: float) -> int:
    """Run the fuzz and print its figures; 1 if any mutant failed."""
    return mutants_report("bundle", mutants, seed, lambda: fuzz(mutants, seed, limit), OUTCOMES)
