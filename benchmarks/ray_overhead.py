"""What the Ray executor costs per work item against the local loop, same chunks.

    PYTHONPATH=. flock /tmp/kgrag-cpu.lock python benchmarks/ray_overhead.py
    PYTHONPATH=. python benchmarks/ray_overhead.py --chunks 8 --workers 2

The chunks are the first ``--chunks`` (default 20) of musique_200 cut as a spec cuts
them (``benchmarks/llm_extraction_speed.py``); each is extracted as a build's extract
step does (``method: llm``, ``prompt: chat``, SmolLM2 135M, greedy first) through
``kgrag.models.executor``: once by the local executor, once by a Ray executor with
``--workers`` actors on a local Ray instance it starts, each through its own fresh call
cache, so every call really runs. ``PYTHONPATH=.`` makes the Ray workers import this
checkout.

Each run is timed in two parts: startup (one warm-up call per worker, on requests no
chunk makes: the local run loads its model, the Ray run starts a local instance and
its actors, each loading the model) and the chunks. Printed per
executor: wall seconds for the chunks, the median seconds one chunk took from its
task's start to its end, chunks per minute; then the overhead per chunk, (Ray wall −
local wall) / chunks, with and without startup, and whether both produced the same
extractions. On a machine of 2 cores, 2 workers share the cores one local run has:
expect no speed-up.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from llm_extraction_speed import musique_chunks

from kgrag.eval.report import format_table
from kgrag.graphs.elements import Extraction
from kgrag.graphs.extraction import extract
from kgrag.graphs.nlp_extraction import Chunk
from kgrag.models.cache import CallCache
from kgrag.models.executor import Executor, LocalExecutor, RayExecutor
from kgrag.models.llm import CachedLLM, LLMSettings
from kgrag.models.registry import resolve_llm

COLUMNS = ("executor", "chunks", "wall_s", "startup_s", "s_per_chunk_median",
           "chunks_per_min")


def smollm2() -> LLMSettings:
    model = resolve_llm("smollm2-135m")
    return LLMSettings(name=model.name, path=model.path, sha256=model.sha256)


def timed_extract(llm: CachedLLM, chunk: Chunk) -> tuple[Extraction, float]:
    started = time.perf_counter()
    extraction = extract(llm, chunk.chunk_id, chunk.unit, style="chat")
    return extraction, time.perf_counter() - started


def warm_up(llm: CachedLLM, worker: int) -> None:
    """One short call on a request no chunk makes: a worker loads its model."""
    llm.ask(f"Say yes ({worker}).", style="chat", max_tokens=1)


def one_run(name: str, executor: Executor, chunks: list[Chunk], workers: int
            ) -> tuple[dict[str, Any], list[Extraction]]:
    with tempfile.TemporaryDirectory(prefix="kgrag-ray-overhead-") as folder:
        cache = CallCache(Path(folder))
        llm = CachedLLM(smollm2(), cache)
        started = time.perf_counter()
        executor.map(llm, warm_up, list(range(workers)))
        startup = time.perf_counter() - started
        started = time.perf_counter()
        results = executor.map(llm, timed_extract, chunks)
        wall = time.perf_counter() - started
        cache.close()
    row = {"executor": name, "chunks": len(chunks), "wall_s": round(wall, 1),
           "startup_s": round(startup, 1),
           "s_per_chunk_median": round(statistics.median(s for _, s in results), 2),
           "chunks_per_min": round(60 * len(chunks) / wall, 1)}
    return row, [x for x, _ in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    chunks = musique_chunks(args.chunks)
    local, local_out = one_run("local", LocalExecutor(), chunks, args.workers)
    on_ray, ray_out = one_run(f"ray ({args.workers} workers)",
                              RayExecutor(None, args.workers), chunks, args.workers)
    print(format_table([local, on_ray], COLUMNS))
    n = len(chunks)
    steady = (on_ray["wall_s"] - local["wall_s"]) / n
    print(f"overhead per chunk: {steady:+.2f} s without startup, "
          f"{steady + on_ray['startup_s'] / n:+.2f} s with it "
          f"({on_ray['startup_s']:.1f} s startup over {n} chunks)")
    print(f"same extractions: {ray_out == local_out}")


if __name__ == "__main__":
    main()
