"""Fuzz a documents folder: each seeded mutant of a real document must be converted or
skipped and counted, beside an ordinary file that is always read, in bounded memory.

    python benchmarks/spec_fuzz.py --kind documents --mutants 1000 --seed 0

The seeds are real files: pages of the project's own docs as Markdown and as HTML, a
PDF typeset from them by fpdf2 (``tests.corpus.own_docs``), and DOCX files written by
python-docx. Each mutant is one of them changed once: bytes flipped, cut short, random
bytes inserted, the suffix swapped for another format's, or a bomb of a random size from
``tests.corpus.bombs`` (DOCX zip and entity bombs, malformed XML, nested, attribute-laden
and element-heavy HTML), or a DOCX zip whose declared sizes or compression method lie.
Each mutant is imported as a folder with ``ordinary.md`` beside it. An exception, the
ordinary file not converted, or an import still running after ``--limit`` seconds is a
failure. The process's peak RSS at the end bounds every mutant's (they run one after
another in it).
"""

from __future__ import annotations

import functools
import logging
import os
import random
import resource
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import Tally
from mutants import report as mutants_report

from kgrag.corpus.importers.files import import_documents
from tests.corpus import bombs
from tests.corpus.own_docs import build

Seeds = dict[str, bytes]  # file name → bytes
ORDINARY = "# Rivers\n\nThe Rhone flows through Lyon and meets the Saone there.\n"
SUFFIXES = (".md", ".txt", ".html", ".htm", ".pdf", ".docx")


def real_seeds(folder: Path) -> Seeds:
    """The project's docs as Markdown, HTML and one PDF, and two DOCX files."""
    made = build(folder)
    seeds = {f"md-{p.name}": p.read_bytes() for p in sorted((made.path / "md").glob("*.md"))[:4]}
    seeds |= {f"html-{p.name}": p.read_bytes()
              for p in sorted((made.path / "html").glob("*.html"))[:4]}
    seeds["manual.pdf"] = (made.path / "manual.pdf").read_bytes()
    seeds["small.docx"] = bombs.small_docx()
    seeds["paragraphs.docx"] = bombs.docx_paragraphs(200)
    return seeds


def flip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    changed = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        changed[rng.randrange(len(changed))] ^= 1 << rng.randrange(8)
    return bytes(changed), ""


def cut(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    return data[: rng.randrange(len(data))], ""


def insert(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    return data[:at] + os.urandom(rng.randint(1, 4096)) + data[at:], ""


def other_suffix(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    return data, rng.choice(SUFFIXES)


def bomb(_data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A bomb of a random size, under its own format's suffix."""
    made: tuple[Callable[[], bytes], str] = rng.choice((
        (lambda: bombs.docx_with(padding_mb=rng.choice((2, 50, 300))), ".docx"),
        (bombs.docx_entity_bomb, ".docx"),
        (bombs.docx_malformed, ".docx"),
        (lambda: bombs.html_nested(rng.choice((100, 5_000, 100_000)),
                                   rng.choice(("div", "span", "li", "table"))), ".html"),
        (lambda: bombs.html_attributes(rng.choice((100, 10_000, 100_000))), ".html"),
        (lambda: bombs.html_elements(rng.choice((1_000, 500_000, 2_000_000))), ".html"),
        (lambda: bombs.html_blocks(rng.choice((1_000, 200_000))), ".html"),
    ))
    return made[0](), made[1]


def lying_zip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A DOCX whose central directory lies about an entry: its uncompressed size, its
    compressed size or its compression method, rewritten in place."""
    if not data.startswith(b"PK"):
        data = bombs.small_docx()
    changed = bytearray(data)
    entries = [at for at in range(len(changed)) if changed[at:at + 4] == b"PK\x01\x02"]
    at = rng.choice(entries)
    field, size = rng.choice(((10, 2), (20, 4), (24, 4)))  # method, compressed, uncompressed
    value = rng.choice((0, 1, 8, 12, 14, 99, 2**16 - 1)) if size == 2 else rng.choice(
        (0, 1, 2**20, 2**31, 2**32 - 1))
    changed[at + field:at + field + size] = struct.pack("<H" if size == 2 else "<I", value)
    return bytes(changed), ".docx"


MUTATIONS: tuple[Callable[[bytes, random.Random], tuple[bytes, str]], ...] = (
    flip, cut, insert, other_suffix, bomb, lying_zip)


def outcome(folder: Path) -> str:
    """What became of the mutant (its status in ``sources``); raises if the ordinary
    file beside it was not converted."""
    corpus = import_documents(folder, {"dataset": "documents", "path": str(folder)})
    statuses = dict(corpus.sources.select("file", "status").iter_rows())
    if statuses.pop("ordinary.md") != "converted":
        raise AssertionError("the ordinary file beside the mutant was not converted")
    (status,) = statuses.values()
    return str(status)


def fuzz(mutants: int, seed: int, limit: float, echo: Callable[[str], None] = print) -> Tally:
    """Run ``mutants`` document mutants."""
    for name in ("kgrag", "pypdf"):  # each skip's warning is counted below; a damaged
        logging.getLogger(name).setLevel(logging.ERROR)  # PDF's fonts warn by the page
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="kgrag-document-fuzz-") as tmp:
        root = Path(tmp)
        seeds = real_seeds(root / "seeds")
        for number in range(mutants):
            rng = random.Random(f"{seed}:{number}")
            name = rng.choice(sorted(seeds))
            mutation = rng.choice(MUTATIONS)
            tally.applied[mutation.__name__] += 1
            data, suffix = mutation(seeds[name], rng)
            folder = root / f"m{number}"
            folder.mkdir()
            (folder / "ordinary.md").write_text(ORDINARY)
            (folder / f"mutant{suffix or Path(name).suffix}").write_bytes(data)
            tally.judge(f"#{number} {name} ({mutation.__name__})",
                        functools.partial(outcome, folder), limit)
            shutil.rmtree(folder)
            tally.every_hundred(number, echo)
    return tally


def report(mutants: int, seed: int, limit: float) -> int:
    """Run the fuzz and print its figures (and the peak RSS); 1 if any mutant failed."""
    code = mutants_report("document", mutants, seed, lambda: fuzz(mutants, seed, limit))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process, every mutant included: {peak_mb:,.0f} MB")
    return code
