"""Document bombs: the peak memory and time of importing each hostile or oversized file,
each in a process of its own.

    PYTHONPATH=. flock /tmp/kgrag-heavy.lock python benchmarks/document_bombs.py [--only KIND ...]

Builds each file (``tests/corpus/bombs.py``: DOCX zip and XML bombs, nested and
attribute-laden HTML, files near and over ``corpus.max_file_mb``, and ordinary documents
of the same sizes beside them) into a folder of its own, then imports that folder in a
fresh Python process through the documents importer (size limit, reading, conversion, as
``kgrag run`` does, without the cache) and prints, per kind, the file's size, its
verdict (``raised``: the import ended in an exception), the seconds the import took and
the process's peak RSS, with the RSS it had before (Python, kgrag and the converters'
libraries loaded). The bound to hold: 1 GB per file. Absent from the figures: building
the bombs (a 1 GB deflated entry takes a while).

Run from another checkout's root with ``PYTHONPATH=.`` (this file and
``tests/corpus/bombs.py`` copied there), it measures that checkout's importer: how the
figures before a change are taken.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from tests.corpus.bombs import (
    docx_entity_bomb,
    docx_malformed,
    docx_paragraphs,
    docx_with,
    html_attributes,
    html_blocks,
    html_elements,
    html_nested,
    html_paragraphs,
)

LIMIT_MB = 1024


def plain_text(megabytes: float) -> bytes:
    line = "The old bridge over the river was built in 1820, and the town grew around it.\n"
    return (line * int(megabytes * 2**20 / len(line))).encode()


KINDS: dict[str, tuple[str, Callable[[], bytes]]] = {
    "docx-1GB-entry": (".docx", lambda: docx_with(padding_mb=1024)),
    "docx-ratio-100MB": (".docx", lambda: docx_with(padding_mb=100)),
    "docx-bzip2-100MB": (".docx", lambda: docx_with(padding_mb=100, method=zipfile.ZIP_BZIP2)),
    "docx-entity-bomb": (".docx", docx_entity_bomb),
    "docx-malformed": (".docx", docx_malformed),
    "docx-2k-paragraphs": (".docx", lambda: docx_paragraphs(2_000)),
    "html-50MB": (".html", lambda: html_paragraphs(50)),
    "html-19MB": (".html", lambda: html_paragraphs(19)),
    "html-990k-blocks": (".html", lambda: html_blocks(990_000)),
    "html-2M-elements": (".html", lambda: html_elements(2_000_000)),
    "html-100k-nested-divs": (".html", lambda: html_nested(100_000)),
    "html-10k-nested-spans": (".html", lambda: html_nested(10_000, "span")),
    "html-100k-attributes": (".html", lambda: html_attributes(100_000)),
    "txt-19MB": (".txt", lambda: plain_text(19)),
}


def child(folder: Path) -> None:
    """Import ``folder`` (one file) and print what became of it, with time and memory."""
    import docx  # noqa: F401  (the converters' libraries, loaded before the baseline)
    import psutil
    import pypdf  # noqa: F401
    import selectolax.lexbor  # noqa: F401

    from kgrag.corpus.importers.files import import_documents

    before = psutil.Process().memory_info().rss / 2**20
    started = time.perf_counter()
    try:
        corpus = import_documents(folder, {"limit": None, "questions": None, "fields": {}})
        [source] = corpus.sources.iter_rows(named=True)
    except Exception as exc:  # noqa: BLE001 (a run that does not survive the file ends so)
        source = {"status": "raised", "detail": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - started
    print(json.dumps({"status": source["status"], "detail": source["detail"],
                      "seconds": seconds, "before_mb": before, "peak_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak RSS. Linux's ``ru_maxrss`` carries the forking parent's peak
    over ``exec``, so a child started by a parent holding a 50 MB page would report the
    parent's; ``VmHWM`` is the new program's own."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(kind: str, root: Path) -> dict:
    suffix, build = KINDS[kind]
    folder = root / kind
    folder.mkdir()
    data = build()
    (folder / f"file{suffix}").write_bytes(data)
    size_mb = len(data) / 2**20
    del data
    script = Path(__file__).resolve()
    done = subprocess.run([sys.executable, str(script), "--child", str(folder)], check=False,
                          text=True, capture_output=True, timeout=1200, cwd=script.parents[1])
    if done.returncode != 0:
        return {"kind": kind, "size_mb": size_mb, "status": f"exit {done.returncode}",
                "detail": done.stderr.strip().splitlines()[-1:], "seconds": None,
                "before_mb": None, "peak_mb": None}
    return {"kind": kind, "size_mb": size_mb, **json.loads(done.stdout.strip().splitlines()[-1])}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", nargs="+", choices=sorted(KINDS), help="these kinds only")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child)
        return
    print(f"{'kind':24} {'file MB':>8} {'verdict':12} {'s':>7} {'RSS MB':>7} {'before':>7}"
          f"  detail")
    over = []
    with tempfile.TemporaryDirectory() as temporary:
        for kind in args.only or KINDS:
            row = measure(kind, Path(temporary))
            seconds = "-" if row["seconds"] is None else f"{row['seconds']:.2f}"
            peak = "-" if row["peak_mb"] is None else f"{row['peak_mb']:.0f}"
            before = "-" if row["before_mb"] is None else f"{row['before_mb']:.0f}"
            print(f"{kind:24} {row['size_mb']:8.2f} {row['status']:12} {seconds:>7} "
                  f"{peak:>7} {before:>7}  {str(row['detail'] or '')[:70]}", flush=True)
            if row["peak_mb"] is None or row["peak_mb"] > LIMIT_MB:
                over.append(kind)
    print(f"every file under {LIMIT_MB} MB peak RSS" if not over else
          f"over {LIMIT_MB} MB or failed: {', '.join(over)}")


if __name__ == "__main__":
    main(sys.argv[1:])
