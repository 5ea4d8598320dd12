"""Bundles crafted or altered by someone else, checksums and seal made to match: every
one is refused with one ``kgrag: error:`` line and exit 2, before the replay writes
anything, and never writes outside the replay folder."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from kgrag.bundle.archive import INDEX, SEAL
from kgrag.cli import main
from tests.bundle.test_bundle_replay import SECTIONS, run_cli
from tests.conftest import REPO, make_project, write_spec
from tests.standin import RuleLLM, run_with

CORPUS = "project/corpus.jsonl"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """A finished tiny run's spec and its bundle, made once for the module."""
    root = tmp_path_factory.mktemp("made")
    project = make_project(root / "proj")
    spec = write_spec(project, **SECTIONS, cache={"dir": "../calls"})
    with pytest.MonkeyPatch.context() as patch:  # not the user's default cache folder
        patch.setenv("KGRAG_CACHE_DIR", str(root / "default-cache"))
        run_with(spec, RuleLLM())
        bundle = root / "tiny.tar.gz"
        assert main(["bundle", str(spec), "-o", str(bundle)]) == 0
    return spec, bundle


def tar_gz(out: Path, entries: list[tuple[str, bytes]], *, name: str = "") -> Path:
    """A gzip'd tar of ``entries``, its gzip header as ``kgrag bundle`` writes it (or,
    with ``name``, as bundles did before: naming the file)."""
    raw = io.BytesIO()
    with (gzip.GzipFile(filename=name, mode="wb", fileobj=raw, mtime=0) as packed,
          tarfile.open(fileobj=packed, mode="w") as tar):
        for member, data in entries:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out.write_bytes(raw.getvalue())
    return out


def forge(bundle: Path, out: Path, edit: Callable[[dict], dict | bytes] = lambda i: i,
          members: dict[str, bytes | None] | None = None) -> Path:
    """``bundle`` as a forger rewrites it: ``members`` replaced (None: removed), the
    index's checksums brought up to date, then ``edit``ed (a dict is written as JSON,
    bytes as they are), and sealed anew."""
    with tarfile.open(bundle) as tar:
        entries = {info.name: tar.extractfile(info).read() for info in tar}
    index = json.loads(entries.pop(INDEX))
    del entries[SEAL]
    for name, data in (members or {}).items():
        entries.pop(name, None) if data is None else entries.update({name: data})
    index["files"] = {name: hashlib.sha256(data).hexdigest() for name, data in entries.items()}
    head = edit(index)
    head = head if isinstance(head, bytes) else json.dumps(head).encode()
    return tar_gz(out, [(INDEX, head), *entries.items(),
                        (SEAL, hashlib.sha256(head).hexdigest().encode())])


def without(key: str) -> Callable[[dict], dict]:
    return lambda index: {k: v for k, v in index.items() if k != key}


def edited(change: Callable[[dict], object]) -> Callable[[dict], dict]:
    def edit(index: dict) -> dict:
        change(index)
        return index
    return edit


def first_source(**fields) -> Callable[[dict], dict]:
    return edited(lambda index: index["sources"][0].update(fields))


def refused(capsys, bundle: Path, folder: Path, *flags: str) -> str:
    """The one error line of replaying ``bundle`` into ``folder``, which stays unmade."""
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder), *flags)
    assert code == 2 and err.startswith("kgrag: error: ") and len(err.splitlines()) == 1, err
    assert not folder.exists()
    return err


@pytest.mark.parametrize("edit, members, message", [
    (lambda i: b'"a bundle"', None, "bundle.json is no index: it must be an object"),
    (lambda i: b"[]", None, "bundle.json is no index"),
    (without("files"), None, "bundle.json is no index"),
    (without("sources"), None, "the index: 'sources' is a required property"),
    (lambda i: json.dumps(i).encode().replace(b'"tiny"', b'"t\xffny"', 1), None,
     "bundle.json is not JSON text"),
    (lambda i: i, {"calls.jsonl": b"not json\n"}, "calls.jsonl line 1 is not JSON"),
    (lambda i: i, {"calls.jsonl": b'["llm:0123"]\n'},
     "calls.jsonl line 1 is not a [key, entry] pair"),
    (edited(lambda i: i.update(spec="project/../../tiny.yaml")), None,
     "spec 'project/../../tiny.yaml' is not a place inside project/"),
    (first_source(member="project/../corpus.jsonl"), None, "is not a place inside project/"),
    (first_source(folder="no"), None, "sources[0].folder: 'no' is not of type 'boolean'"),
    (lambda i: i, {"cache/cache.db": b"SQLite format 3\0"},
     "it holds 'cache/cache.db', which kgrag bundle never ships"),
    (lambda i: i, {"project/outputs/tiny/corpus-0/files.json": b"{}"},
     "it holds 'project/outputs/tiny/corpus-0/files.json', which kgrag bundle never ships"),
    (lambda i: i, {"metrics.json": b"\xfd\x00 not utf-8"}, "metrics.json is not JSON"),
    (lambda i: i, {"metrics.json": b'{"rows": [{"recall@5": 1.0}]}'},
     "metrics.json is not kgrag's metrics ('strategy' is a required property)"),
    (lambda i: i, {"metrics.json": b"[]"}, "metrics.json is not kgrag's metrics"),
], ids=["string", "list", "no-files", "no-sources", "not-utf8", "calls-not-json",
        "calls-one-field", "spec-climbs", "source-climbs", "source-field-type",
        "into-the-cache", "into-the-run-folder", "metrics-not-utf8", "metrics-row-unnamed",
        "metrics-list"])
def test_a_crafted_index_is_one_error_before_any_write(made, tmp_path, capsys, edit, members,
                                                       message):
    bundle = forge(made[1], tmp_path / "crafted.tar.gz", edit, members)
    assert message in refused(capsys, bundle, tmp_path / "replay")


def test_a_spec_outside_the_bundle_is_not_replayed(made, tmp_path, capsys):
    """The spec that made the bundle, named by its absolute path: a replay would run it,
    on its own corpus, and call it identical."""
    spec, bundle = made
    crafted = forge(bundle, tmp_path / "crafted.tar.gz", edited(lambda i: i.update(
        spec=str(spec))))
    assert f"spec '{spec}' is not a place inside project/" in refused(
        capsys, crafted, tmp_path / "replay")


def test_a_source_placed_outside_is_refused_by_the_real_command(made, tmp_path):
    """``kgrag replay --corpus`` of a bundle whose corpus member climbs four folders: the
    real command, in a process of its own, writes nothing anywhere."""
    spec, bundle = made
    crafted = forge(bundle, tmp_path / "crafted.tar.gz",
                    first_source(member="../../../../elsewhere/SLIP3.jsonl", copied=False),
                    {CORPUS: None})
    folder = tmp_path / "a" / "b" / "c" / "d" / "replay"
    done = subprocess.run(
        [sys.executable, "-m", "kgrag.cli", "replay", str(crafted), "--dir", str(folder),
         "--corpus", str(spec.parent.parent / "corpus.jsonl")],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert list(tmp_path.rglob("SLIP3.jsonl")) == []
    assert not (tmp_path / "a").exists()  # neither the replay folder nor a/elsewhere/
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "'../../../../elsewhere/SLIP3.jsonl' is not a place inside project/" in done.stderr


def test_a_bundle_joined_to_itself_is_refused(made, tmp_path, capsys):
    bundle = tmp_path / "twice.tar.gz"
    bundle.write_bytes(made[1].read_bytes() * 2)
    assert "is truncated or damaged (data follows the end of its gzip stream" in refused(
        capsys, bundle, tmp_path / "replay")


@pytest.mark.parametrize("at", [3, 4, 8, 9])
def test_a_byte_changed_in_the_gzip_header_is_found(made, tmp_path, capsys, at):
    """The header carries no checksum of its own: kgrag writes it the same every time
    (no name, time 0), and refuses any other."""
    data = bytearray(made[1].read_bytes())
    data[at] ^= 0xFF
    bundle = tmp_path / "flipped.tar.gz"
    bundle.write_bytes(bytes(data))
    assert "its gzip header is not the one kgrag bundle writes" in refused(
        capsys, bundle, tmp_path / "replay")


def test_a_byte_flipped_in_an_earlier_bundles_file_name_is_found(made, tmp_path, capsys):
    """Bundles written before the fixed header name their tar in it: still replayed,
    unless a byte of the name was changed."""
    with tarfile.open(made[1]) as tar:
        entries = [(info.name, tar.extractfile(info).read()) for info in tar]
    named = tar_gz(tmp_path / "named.tar.gz", entries, name=".tmp-tiny.tar.gz")
    data = bytearray(named.read_bytes())
    assert data[10:24] == b".tmp-tiny.tar\0"
    code, out, _ = run_cli(capsys, "replay", str(named), "--dir", str(tmp_path / "fine"))
    assert code == 0 and "0 model calls" in out
    data[16] ^= 0xFF
    named.write_bytes(bytes(data))
    assert "its gzip header is not the one kgrag bundle writes" in refused(
        capsys, named, tmp_path / "replay")


def test_a_huge_member_outside_the_index_is_refused_by_its_header(made, tmp_path, capsys):
    """A 1 GiB member the index does not list: its tar header is enough to refuse it, so
    its data is never read (here there is none: the file ends after its first MiB)."""
    with tarfile.open(made[1]) as tar:
        entries = [(info.name, tar.extractfile(info).read()) for info in tar]
    header = tarfile.TarInfo("project/huge.bin")
    header.size = 2**30
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
        for name, data in entries[:1]:  # the index
            info = tarfile.TarInfo(name)
            info.size = len(data)
            packed.write(info.tobuf() + data + bytes(-len(data) % 512))
        packed.write(header.tobuf() + bytes(2**20))
    bundle = tmp_path / "huge.tar.gz"
    bundle.write_bytes(raw.getvalue())
    assert "project/huge.bin is not listed in bundle.json" in refused(
        capsys, bundle, tmp_path / "replay")



class Zeros:
    """A file of ``size`` zero bytes, read without holding them."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def bomb(made_bundle: Path, out: Path, size: int, *, data: bool) -> Path:
    """``made_bundle`` with its corpus replaced by ``size`` zero bytes, listed in the index
    with their true checksum and sealed anew: a member that gzip shrinks a thousandfold.
    Without ``data`` the member's header claims the size and the file ends after it (its
    listed checksum is then the empty file's: the header is refused before any read)."""
    with tarfile.open(made_bundle) as tar:
        entries = {info.name: tar.extractfile(info).read() for info in tar}
    index = json.loads(entries.pop(INDEX))
    del entries[SEAL], entries[CORPUS]
    digest, zeros = hashlib.sha256(), Zeros(size if data else 0)  # no data: no checksum
    while chunk := zeros.read(2**20):
        digest.update(chunk)
    index["files"] = {name: hashlib.sha256(member).hexdigest() for name, member in entries.items()}
    index["files"][CORPUS] = digest.hexdigest()
    head = json.dumps(index).encode()
    with (gzip.GzipFile(filename="", mode="wb", fileobj=out.open("wb"), mtime=0) as packed,
          tarfile.open(fileobj=packed, mode="w") as tar):
        for name, member in [(INDEX, head), *entries.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(member)
            tar.addfile(info, io.BytesIO(member))
        info = tarfile.TarInfo(CORPUS)
        info.size = size
        if not data:
            packed.write(info.tobuf())
            return out
        tar.addfile(info, Zeros(size))
        info = tarfile.TarInfo(SEAL)
        info.size = 64
        tar.addfile(info, io.BytesIO(hashlib.sha256(head).hexdigest().encode()))
    return out


@pytest.mark.parametrize("size, data", [(2**26, True), (2**40, False)],
                         ids=["64-MiB-of-zeros", "header-claims-1-TiB"])
def test_a_listed_member_bigger_than_the_bundle_unpacks_to_is_refused(made, tmp_path, capsys,
                                                                       size, data):
    """Was: a listed member was read whole into memory, whatever its size, and written
    into the replay folder (a 64 MiB corpus of zeros from a bundle of 100 kB); its
    header is enough to refuse it, as for a member the index does not list."""
    bundle = bomb(made[1], tmp_path / "bomb.tar.gz", size, data=data)
    assert bundle.stat().st_size < 2**18  # a quarter of a MiB at most
    before = sorted(tmp_path.rglob("*"))
    err = refused(capsys, bundle, tmp_path / "replay")
    assert f"{CORPUS} is {size:,} bytes, more than a bundle of {bundle.stat().st_size:,} " \
        "bytes unpacks to" in err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, here or elsewhere

def test_the_bundle_file_is_the_same_for_the_same_run(made, tmp_path):
    """No time and no name in the gzip header: bundling a run twice gives one file."""
    spec, bundle = made
    again = tmp_path / "again.tar.gz"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "cache"))
        assert main(["bundle", str(spec), "-o", str(again)]) == 0
    assert again.read_bytes() == bundle.read_bytes()


def test_the_bundle_fuzz_ends_every_mutant_replayed_or_refused(tmp_path):
    """``benchmarks/spec_fuzz.py --kind bundles`` on 12 mutants (the benchmark runs
    1,000): a real bundle forged, damaged or mutated, each replayed in a folder of its own."""
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "spec_fuzz.py"),
                           "--kind", "bundles", "--mutants", "12", "--seed", "0"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    counts = dict(re.findall(r"^  ([a-z]+) +(\d+)$", done.stdout, flags=re.MULTILINE))
    assert counts["failed"] == counts["hung"] == "0"
    assert int(counts["refused"]) > 0
