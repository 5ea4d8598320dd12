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

The model's time hides what Ray itself costs a call, so the same is then run with a
stand-in model that answers at once (``--calls``, default 200 items; ``--chunks 0``
runs only this): what is left per item is the dispatch (a thread, the cache, a Ray
call to an actor and back, against a plain function call).
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
from kgrag.graphs.extraction.llm import extract
from kgrag.graphs.extraction.nlp import Chunk
from kgrag.models.backend import Completion, LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.executor import Executor, LocalExecutor, RayExecutor
from kgrag.models.llm import CachedLLM
from kgrag.models.registry import resolve_llm

COLUMNS = ("executor", "chunks", "wall_s", "startup_s", "s_per_chunk_median",
           "chunks_per_min")


def smollm2() -> LLMSettings:
    model = resolve_llm("smollm2-135m")
    return LLMSettings(name=model.name, path=model.path, sha256=model.sha256)


class InstantModel:
    """A stand-in backend that answers every request at once with an empty extraction
    (defined in ``__main__``, so Ray ships it to the workers by value)."""

    def generate(self, request: dict[str, Any]) -> Completion:
        return Completion('{"entities": [], "relationships": []}', 1, 1, cached=False)


def timed_extract(llm: CachedLLM, chunk: Chunk) -> tuple[Extraction, float]:
    started = time.perf_counter()
    extraction = extract(llm, chunk.chunk_id, chunk.unit, style="chat")
    return extraction, time.perf_counter() - started


def warm_up(llm: CachedLLM, worker: int) -> None:
    """One short call on a request no chunk makes: a worker loads its model."""
    llm.ask(f"Say yes ({worker}).", style="chat", max_tokens=1)


def one_run(name: str, executor: Executor, chunks: list[Chunk], workers: int,
            backend: Any = None) -> tuple[dict[str, Any], list[Extraction]]:
    with tempfile.TemporaryDirectory(prefix="kgrag-ray-overhead-") as folder:
        cache = CallCache(Path(folder))
        llm = CachedLLM(smollm2(), cache, backend)
        started = time.perf_counter()
        executor.map(llm, warm_up, list(range(workers)))
        startup = time.perf_counter() - started
        started = time.perf_counter()
        results = executor.map(llm, timed_extract, chunks)
        wall = time.perf_counter() - started
        cache.close()
    row = {"executor": name, "chunks": len(chunks), "wall_s": round(wall, 3),
           "startup_s": round(startup, 3),
           "s_per_chunk_median": round(statistics.median(s for _, s in results), 4),
           "chunks_per_min": round(60 * len(chunks) / wall, 1)}
    return row, [x for x, _ in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if args.chunks:
        compare("SmolLM2 135M", musique_chunks(args.chunks), args.workers, None, 1)
    stand_ins = [Chunk(f"s{i}", f"Item {i} of the dispatch test.", None)
                 for i in range(args.calls)]
    compare("instant stand-in", stand_ins, args.workers, InstantModel(), 1000)


def compare(model: str, chunks: list[Chunk], workers: int, backend: Any, scale: int) -> None:
    """Both executors over ``chunks``; overhead in seconds (``scale`` 1) or ms (1000).
    Each Ray executor starts its own actors; the second one reuses the Ray instance."""
    local, local_out = one_run("local", LocalExecutor(), chunks, workers, backend)
    remote, ray_out = one_run(f"ray ({workers} workers)", RayExecutor(None, workers), chunks,
                              workers, backend)
    print(f"\n{model}, {len(chunks)} items:")
    print(format_table([local, remote], COLUMNS))
    n, unit = len(chunks), "s" if scale == 1 else "ms"
    steady = (remote["wall_s"] - local["wall_s"]) / n
    print(f"overhead per item: {steady * scale:+.2f} {unit} without startup, "
          f"{(steady + remote['startup_s'] / n) * scale:+.2f} {unit} with it "
          f"({remote['startup_s']:.1f} s startup)")
    print(f"same outputs: {ray_out == local_out}")


if __name__ == "__main__":
    main()
