"""What the ``dense_index`` step holds: its body (every chunk embedded through the call
cache, then the LanceDB table and its ANN index) run on a built chunks artefact, with the
process's RSS sampled every 0.2 s, by phase.

    PYTHONPATH=<checkout> python benchmarks/dense_memory.py CHUNKS_FOLDER OUT_FOLDER \\
        [--cache DIR] [--chunks N] [--backend openvino-int8] [--batch-size 64]

The checkout on ``PYTHONPATH`` is the code measured, so two checkouts compare back to
back. ``--cache`` defaults to kgrag's default cache; an empty folder makes every vector
computed (the embedding's own memory), a build's cache makes none computed (the table's
and the index's). ``--chunks`` keeps the artefact's first N chunks. The index is the
spec's default ``dense_index.ann`` (built past its ``min_rows``, 100,000 rows). It prints
one JSON line: chunks, vectors computed, seconds and peak RSS of each phase, RSS before
and after the embedder's model was loaded, and the growth per computed vector from the
first tenth of the chunks to the last (the embedding runs in those two calls, so the
working memory that the first texts take is apart). The table is left in OUT_FOLDER;
``--vectors FILE`` saves the vectors (``.npy``) for a comparison between checkouts.
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
    args = parser.parse_args()

    import kgrag
    from kgrag.configuration import default_cache_dir
    from kgrag.contents.chunks import read_chunks
    from kgrag.contents.dense import write_dense
    from kgrag.models.cache import CallCache
    from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
    from kgrag.models.registry import resolve_embedder
    from kgrag.spec.schema import SCHEMA, fill_defaults
    from kgrag.store.vectors import ann_settings

    sampler = PeakSampler()
    args.out.mkdir(parents=True, exist_ok=False)
    base = rss_mb()
    started = time.perf_counter()
    chunks = read_chunks(args.chunks, ["chunk_id", "context"])
    if args.limit is not None:
        chunks = chunks.head(args.limit)
    texts, ids = chunks["context"].to_list(), chunks["chunk_id"].to_list()
    del chunks
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256,
                                batch_size=args.batch_size, backend=args.backend)
    embedder = CachedEmbedder(settings, CallCache(args.cache or default_cache_dir()))
    read_s, read_peak = time.perf_counter() - started, sampler.take()

    # the model alone, loaded before the embedding (a warm run never loads it)
    before_model = rss_mb()
    embedder.backend.encode(["a text to load the model"])
    loaded = rss_mb()
    sampler.take()
    # in two calls, so that the growth over the second is apart from the working memory
    # that the first pieces of the longest texts take
    started = time.perf_counter()
    tenth = len(texts) // 10
    first = embedder.encode(texts[:tenth])
    after_tenth, computed_tenth = rss_mb(), embedder.usage.calls
    vectors = np.concatenate([first, embedder.encode(texts[tenth:])]) if tenth else (
        embedder.encode(texts))
    embed_s, embed_peak, after_embed = time.perf_counter() - started, sampler.take(), rss_mb()
    computed = embedder.usage.calls
    del texts
    if args.vectors is not None:
        np.save(args.vectors, vectors)

    started = time.perf_counter()
    # the spec's ``dense_index: {ann: {}}`` as the step's fingerprint keeps it
    ann = ann_settings(fill_defaults({}, SCHEMA["$defs"]["ann"]))
    table = write_dense(args.out, ids, vectors, ann)
    table_s, table_peak = time.perf_counter() - started, sampler.take()
    print(json.dumps({
        "kgrag": str(Path(kgrag.__file__).parent.parent), "chunks": len(ids),
        "computed": computed, "backend": args.backend, "batch_size": args.batch_size,
        "ann": table.ann is not None,
        "seconds": {"read": round(read_s, 1), "embed": round(embed_s, 1),
                    "table": round(table_s, 1)},
        "peak_rss_mb": {"read": round(read_peak), "embed": round(embed_peak),
                        "table": round(table_peak),
                        "process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                         / 1024)},
        "rss_mb": {"start": round(base), "before_model": round(before_model),
                   "model_loaded": round(loaded), "after_first_tenth": round(after_tenth),
                   "after_embed": round(after_embed)},
        "embed_growth_kb_per_computed": (
            round((after_embed - after_tenth) * 1024 / (computed - computed_tenth), 1)
            if computed > computed_tenth else None)}))


if __name__ == "__main__":
    sys.exit(main())
