"""The exported embedder in one process against several at once: does a machine's
second core add throughput when each process holds its own copy of the model?

    python benchmarks/embed_processes.py [--backend openvino-int8] [--texts 512]
        [--processes 2]

Two Ray nodes on one machine (``benchmarks/ray_build.py``) run one embedding actor
each: two processes, each with its own copy of the model on one thread. This prints
the texts per second of one such process alone, of ``--processes`` of them at once
(their sum), and of one process on as many threads, over the same real chunks (the
shared MuSiQue sample's paragraphs, longest first in batches of 64, as the cached
embedder sends them), and, for contrast, of numpy float32 matrix products in the same
arrangements (a compute-bound load that fits each core's cache). The export must
exist (run any spec or ``benchmarks/embed_backends.py`` with the backend once).
Timings beside other work are upper bounds; the ratios are measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH = 64


def embed_rate(backend_name: str, texts: int, threads: int) -> float:
    """Texts per second of the exported ``backend_name`` on ``threads`` threads."""
    from kgrag.configuration import default_cache_dir
    from kgrag.corpus.importers import load_corpus
    from kgrag.models.embed.backends import BACKENDS
    from kgrag.models.embed.runtime import ExportedBackend, calibration_texts
    from kgrag.models.registry import resolve_embedder

    corpus = load_corpus({"dataset": "musique", "path": "musique_200.jsonl", "limit": None,
                          "questions": None}, ROOT.parent / "shared" / "data")
    chosen = sorted(corpus.documents["text"].to_list()[:texts], key=len, reverse=True)
    model = resolve_embedder("all-MiniLM-L6-v2")
    backend = ExportedBackend(model.path, model.sha256, BACKENDS[backend_name],
                              default_cache_dir() / "exported-embedders", calibration_texts,
                              threads=threads)
    backend.encode(chosen[:BATCH])  # loads the export, not timed
    started = time.perf_counter()
    for at in range(0, len(chosen), BATCH):
        backend.encode(chosen[at:at + BATCH])
    return len(chosen) / (time.perf_counter() - started)


def product_rate(seconds: float = 10.0) -> float:
    """512 × 512 float32 matrix products per second (on the BLAS threads ``children``
    set through ``OMP_NUM_THREADS``)."""
    import numpy as np

    a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        a @ a
        done += 1
    return done / (time.perf_counter() - started)


def children(n: int, load: list) -> float:
    """The summed rate of ``n`` child processes running ``load`` at once (its last item:
    each one's threads)."""
    command = [sys.executable, __file__, "--child", json.dumps(load)]
    env = {**os.environ, "OMP_NUM_THREADS": str(load[-1])}
    running = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
               for _ in range(n)]
    return sum(float(p.communicate()[0].split()[-1]) for p in running)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", default="openvino-int8")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = json.loads(args.child)
        rate = (embed_rate(rest[0], int(rest[1]), int(rest[2])) if kind == "embed"
                else product_rate())
        print(rate)
        return
    n = args.processes
    print(f"| load | 1 process, 1 thread | {n} processes, 1 thread each | ratio "
          f"| 1 process, {n} threads | ratio |\n|---|---|---|---|---|---|")
    for name, load, threaded in (
            (f"{args.backend}, texts/s", ["embed", args.backend, args.texts, 1],
             ["embed", args.backend, args.texts, n]),
            ("float32 512² products/s", ["product", 1], ["product", n])):
        one, many, wide = children(1, load), children(n, load), children(1, threaded)
        print(f"| {name} | {one:.1f} | {many:.1f} | {many / one:.2f}x | {wide:.1f} | "
              f"{wide / one:.2f}x |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
