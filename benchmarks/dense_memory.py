"""What the ``dense_index`` step holds: its body (the chunks embedded through the call
cache and appended to the LanceDB table a part at a time, then its ANN index) run on a
built chunks artefact, with the process's RSS sampled every 0.2 s, by phase.

    PYTHONPATH=<checkout> python benchmarks/dense_memory.py CHUNKS_FOLDER OUT_FOLDER \\
        [--cache DIR] [--chunks N] [--backend openvino-int8] [--batch-size 64] \\
        [--part-rows 32768]

The checkout on ``PYTHONPATH`` is the code measured. ``--cache`` defaults to kgrag's
default cache; an empty folder makes every vector computed (the embedding's own memory),
a build's cache makes none computed (the table's and the index's). ``--chunks`` keeps the
artefact's first N chunks (copied beside OUT_FOLDER, into ``<OUT_FOLDER>-chunks``);
``--part-rows`` sets the step's ``PART_ROWS``, so that a sample of a few thousand chunks
is embedded in several parts and the growth after the first is measured. The
index is the spec's default ``dense_index.ann`` (built past its ``min_rows``, 100,000
rows). It prints one JSON line: chunks, vectors computed, seconds and peak RSS of each
phase, RSS before and after the embedder's model was loaded, after the first part and
after the last, and the growth per chunk between those two (what the step keeps of each
chunk while it writes the table). The table is left in OUT_FOLDER; ``--vectors FILE``
saves its vectors (``.npy``) for a comparison between checkouts.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import threading
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    """This process's resident memory now (``VmRSS``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class PeakSampler:
    """The highest RSS seen since the last ``take``, sampled on a thread."""

    def __init__(self) -> None:
        self.peak = rss_mb()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mb())
            time.sleep(0.2)

    def take(self) -> float:
        peak, self.peak = max(self.peak, rss_mb()), rss_mb()
        return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chunks", type=Path, help="a chunks artefact folder")
    parser.add_argument("out", type=Path, help="an empty folder for the dense artefact")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--chunks", dest="limit", type=int, default=None)
    parser.add_argument("--backend", default="openvino-int8")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--vectors", type=Path, default=None)
    parser.add_argument("--part-rows", type=int, default=None)
    args = parser.parse_args()

    import polars as pl

    import kgrag
    from kgrag.configuration import default_cache_dir
    from kgrag.contents import dense
    from kgrag.contents.chunks import CHUNKS_FILE
    from kgrag.contents.dense import write_dense
    from kgrag.models.cache import CallCache
    from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
    from kgrag.models.registry import resolve_embedder
    from kgrag.progress import Progress
    from kgrag.spec.schema import SCHEMA, fill_defaults
    from kgrag.store.vectors import ann_settings

    if args.part_rows is not None:
        dense.PART_ROWS = args.part_rows
    part_rows = dense.PART_ROWS
    sampler = PeakSampler()
    args.out.mkdir(parents=True, exist_ok=False)
    base = rss_mb()
    chunks = args.chunks
    if args.limit is not None:
        chunks = args.out.with_name(args.out.name + "-chunks")
        chunks.mkdir()
        pl.scan_parquet(args.chunks / CHUNKS_FILE).head(args.limit).sink_parquet(
            chunks / CHUNKS_FILE)
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256,
                                batch_size=args.batch_size, backend=args.backend)
    embedder = CachedEmbedder(settings, CallCache(args.cache or default_cache_dir()))

    # the model alone, loaded before the embedding (a warm run never loads it)
    before_model = rss_mb()
    embedder.backend.encode(["a text to load the model"])
    loaded = rss_mb()
    sampler.take()
    first: dict[str, float] = {}
    parts: list[int] = []

    def embed(texts: list[str], progress: Progress) -> np.ndarray:
        # after the first part, as the second starts (what the step gave back after the
        # first is gone): the working memory its longest texts took
        if parts and not first:
            first.update(rss=rss_mb())
        parts.append(len(texts))
        return embedder.encode(texts, progress=progress)

    # the spec's ``dense_index: {ann: {}}`` as the step's fingerprint keeps it
    ann = ann_settings(fill_defaults({}, SCHEMA["$defs"]["ann"]))
    started = time.perf_counter()
    table = write_dense(args.out, chunks, embed)  # the table alone, then its index
    write_s, write_peak, after_write = time.perf_counter() - started, sampler.take(), rss_mb()
    computed = embedder.usage.calls
    started = time.perf_counter()
    table = table.indexed(ann)
    index_s, index_peak = time.perf_counter() - started, sampler.take()
    if args.vectors is not None:
        np.save(args.vectors, table.rows()[1])
    rows = len(table)
    print(json.dumps({
        "kgrag": str(Path(kgrag.__file__).parent.parent), "chunks": rows,
        "part_rows": part_rows, "computed": computed, "backend": args.backend,
        "batch_size": args.batch_size, "ann": table.ann is not None,
        "seconds": {"embed_and_write": round(write_s, 1), "index": round(index_s, 1)},
        "peak_rss_mb": {"embed_and_write": round(write_peak), "index": round(index_peak),
                        "process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                         / 1024)},
        "rss_mb": {"start": round(base), "before_model": round(before_model),
                   "model_loaded": round(loaded),
                   "after_first_part": round(first["rss"]) if first else None,
                   "after_write": round(after_write)},
        "growth_kb_per_chunk_after_the_first_part": (
            round((after_write - first["rss"]) * 1024 / (rows - min(rows, part_rows)), 2)
            if rows > part_rows else None)}))


if __name__ == "__main__":
    sys.exit(main())
