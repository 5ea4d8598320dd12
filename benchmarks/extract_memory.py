"""What the nlp ``extract`` step holds per chunk: the step body run on a built chunks
artefact, its extractions answered by the call cache (a warm rerun: no spaCy), its peak
RSS over the process's RSS before the step, divided by the chunks.

    PYTHONPATH=<checkout> python benchmarks/extract_memory.py CHUNKS_FOLDER OUT_FOLDER

The checkout on ``PYTHONPATH`` is the code measured, so two checkouts compare back to
back in one command. It prints one JSON line (chunks, seconds, RSS before, peak RSS,
bytes per chunk over the base, the artefact files' sha256) and leaves the artefact in
OUT_FOLDER; identical hashes between two checkouts mean identical artefact bytes. The
call cache is ``--cache`` (default: kgrag's default cache, where a build stored its
parses); a chunk it does not hold is parsed, which the notes' ``parsed`` shows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import time
from pathlib import Path
from types import SimpleNamespace


def rss_mb() -> float:
    """This process's resident memory now (``VmRSS``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chunks", type=Path, help="a chunks artefact folder")
    parser.add_argument("out", type=Path, help="an empty folder for the extract artefact")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--pipeline", default="en_core_web_sm")
    args = parser.parse_args()

    import kgrag
    from kgrag.configuration import default_cache_dir
    from kgrag.models.cache import CallCache
    from kgrag.models.executor import LocalExecutor
    from kgrag.models.pipelines import resolve_pipeline
    from kgrag.steps.skeleton import extract_core
    from kgrag.steps.step import Step, StepContext

    models = SimpleNamespace(pipeline=resolve_pipeline(args.pipeline),
                             cache=CallCache(args.cache or default_cache_dir()),
                             executor=LocalExecutor())
    args.out.mkdir(parents=True, exist_ok=False)
    ctx = StepContext(Step("extract", "extract", {"method": "nlp"}, {"chunks": "chunks"}),
                      None, models, args.out, {"chunks": args.chunks})
    base = rss_mb()
    started = time.perf_counter()
    extract_core.run(ctx)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    chunks = ctx.notes["core_chunks"]
    print(json.dumps({
        "kgrag": str(Path(kgrag.__file__).parent.parent), "chunks": chunks,
        "seconds": round(seconds, 1), "rss_before_mb": round(base), "peak_rss_mb": round(peak),
        "bytes_per_chunk": round((peak - base) * 2**20 / max(1, chunks)),
        "notes": {k: v for k, v in ctx.notes.items() if k != "failed_chunks"},
        "sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                   for p in sorted(args.out.iterdir())}}))


if __name__ == "__main__":
    sys.exit(main())
