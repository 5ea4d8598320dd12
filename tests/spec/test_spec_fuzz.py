"""Fuzzed specs: every broken spec is refused with one ``KgragError``, never a traceback.

Seeded mutations of the shipped specs (flipped bytes, truncations, lost and doubled
lines, odd values in place of scalars) must each be accepted or refused by validation;
an accepted one must then compile to a plan as ``kgrag run --dry-run`` does, which runs
no step and loads no model, and may fail only with ``KgragError`` too.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from kgrag import api
from kgrag.errors import KgragError
from kgrag.models import registry
from kgrag.spec import check_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"
SEEDS = ("quickstart.yaml", "ket_sweep_musique.yaml", "hugrag_musique.yaml")
CASES_PER_SEED = 100
ODD_VALUES = (
    b".nan", b".inf", b"-.inf", b"-1", b"-0.0", b"1.0e+400", b"1" * 400, b"9" * 5000,
    b"x" * 300, b"y" * 5000, b"[]", b"[1, 1]", b"[.nan, 2]", b"[[1]]", b"{}", b"{a: 1}",
    b"null", b"''", b"true", b"2024-06-01", b'"\\0"', b'"a\\x00b"', b"\xff\xfe", b"\x00",
    b"\x1b", b"!!binary aGk=", b"!!python/name:os.system", b"*nowhere", b"&a [*a]", b"..",
    b"x/../../..", b"~nobody-here/x", b"0x1F", b"1_000", b"'a: b'", b"@", b"|", b"- 1",
)
# numbers at or near the schema's bounds: they often keep a spec valid, so planning is fuzzed too
NEAR_NUMBERS = (b"0", b"1", b"2", b"0.5", b"1.0", b"16", b"64", b"1000", b"1000000")
NUMBER = re.compile(rb"-?[0-9][0-9.]*")
# a scalar value after "key: ", "[" or ", " in block or flow style (not a key: no ":" after)
SCALAR = re.compile(rb"(?:(?<=: )|(?<=\[)|(?<=, ))[^\s,:{}\[\]#][^,:{}\[\]\n#]*+(?!:)")


def flip_byte(text: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(text))
    return text[:at] + bytes([rng.randrange(256)]) + text[at + 1:]


def truncate(text: bytes, rng: random.Random) -> bytes:
    return text[: rng.randrange(len(text))]


def drop_line(text: bytes, rng: random.Random) -> bytes:
    lines = text.splitlines(keepends=True)
    del lines[rng.randrange(len(lines))]
    return b"".join(lines)


def double_line(text: bytes, rng: random.Random) -> bytes:
    lines = text.splitlines(keepends=True)
    at = rng.randrange(len(lines))
    return b"".join([*lines[: at + 1], lines[at], *lines[at + 1:]])


def odd_value(text: bytes, rng: random.Random) -> bytes:
    scalars = list(SCALAR.finditer(text))
    if not scalars:
        return text
    found = rng.choice(scalars)
    return text[: found.start()] + rng.choice(ODD_VALUES) + text[found.end():]


def near_value(text: bytes, rng: random.Random) -> bytes:
    """A scalar replaced by one of its kind: a number near a bound, or another word of the spec."""
    scalars = list(SCALAR.finditer(text))
    if not scalars:
        return text
    found = rng.choice(scalars)
    numeric = NUMBER.fullmatch(found.group()) is not None
    words = [s.group() for s in scalars if (NUMBER.fullmatch(s.group()) is None) != numeric]
    value = rng.choice(NEAR_NUMBERS if numeric else words)
    return text[: found.start()] + value + text[found.end():]


MUTATIONS: tuple[Callable[[bytes, random.Random], bytes], ...] = (
    flip_byte, truncate, drop_line, double_line, odd_value, odd_value,
    near_value, near_value, near_value, near_value,
)


def seed_text(name: str) -> bytes:
    """A shipped spec, reading the ``project`` fixture's small corpus."""
    text = (SPECS / name).read_bytes()
    return re.sub(rb"path: [^,}\n]+", b"path: ../corpus.jsonl", text, count=1)


def mutant(text: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    """One or two mutations of ``text``, and their names for the failure report."""
    applied = []
    for _ in range(rng.randint(1, 2)):
        mutation = rng.choice(MUTATIONS)
        if text:
            text = mutation(text, rng)
            applied.append(mutation.__name__)
    return text, applied


def outcome(path: Path) -> str:
    """"refused" or "planned", or the traceback of anything but ``KgragError``."""
    try:
        if check_spec(path):
            return "refused"
        session = api.open_session(path)
        try:
            api.dry_run(session)
        finally:
            session.cache.close()
    except KgragError:
        return "refused"
    except Exception:  # noqa: BLE001 - anything else is the bug this test looks for
        return traceback.format_exc(limit=-3)
    return "planned"


@pytest.fixture
def gemma_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its package re-hashes the model file on every lookup (0.3 s); one lookup serves all."""
    path = registry.BUNDLED_LLMS["gemma3-270m"]()
    monkeypatch.setitem(registry.BUNDLED_LLMS, "gemma3-270m", lambda: path)


@pytest.mark.usefixtures("gemma_found_once")
def test_mutated_specs_fail_only_with_kgrag_errors(project: Path) -> None:
    path = project / "specs" / "mutant.yaml"
    failures, planned = [], 0
    for seed in SEEDS:
        text = seed_text(seed)
        for case in range(CASES_PER_SEED):
            rng = random.Random(f"{seed}:{case}")
            mutated, applied = mutant(text, rng)
            path.write_bytes(mutated)
            result = outcome(path)
            planned += result == "planned"
            if result not in ("refused", "planned"):
                failures.append(f"{seed} case {case} ({', '.join(applied)}): {mutated[:300]!r}\n"
                                f"{result}")
    assert not failures, f"{len(failures)} mutants escaped:\n\n" + "\n\n".join(failures[:5])
    assert planned >= 30  # enough mutants stay valid for planning to be fuzzed too


def test_the_fuzz_benchmark_ends_every_mutant_in_success_or_a_kgrag_error(tmp_path: Path) -> None:
    """``benchmarks/spec_fuzz.py`` on 100 mutants (the benchmark runs 1,000): trailing line
    breaks, huge thread counts, numbers YAML versions disagree on, bad corpora (a
    symbolic-link loop, a line nested 100,000 deep) and the rest, every shipped spec."""
    repo = SPECS.parent
    env = {**os.environ, "PYTHONPATH": str(repo), "KGRAG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(repo / "benchmarks" / "spec_fuzz.py"),
                           "--mutants", "100", "--seed", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    counts = dict(re.findall(r"^  ([a-z -]+?) +(\d+)$", done.stdout, flags=re.MULTILINE))
    assert counts["failed"] == counts["hung"] == "0"
    assert sum(map(int, counts.values())) == 100
    # some mutants got past the planner, whichever specs the seed drew
    assert int(counts["import refused"]) + int(counts["planned"]) + int(counts["imported"]) > 0
