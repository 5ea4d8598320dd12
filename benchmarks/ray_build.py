"""The LLM-free build on Ray: spaCy extraction and chunk embedding, one node against two.

    PYTHONPATH=. flock /tmp/kgrag-heavy.lock python benchmarks/ray_build.py
    PYTHONPATH=. python benchmarks/ray_build.py --chunks 600 --backend openvino-int8

The chunks are the first ``--chunks`` (default all 3,229) of musique_200 cut as a spec
cuts them (256 / 32, titled: ``benchmarks/llm_extraction_speed.py``). For one node, then
two, each of one CPU, this starts a Ray cluster on 127.0.0.1 as a user starts one (``ray
start --head``, ``ray start --address``: ``tests/ray_nodes.py``), and runs through the
Ray executor with one worker per node, each through a fresh call cache, so every batch
really runs: the nlp extraction (``en_core_web_sm``, as a build's extract step runs it)
and the embedding of the chunks' retrieval units (MiniLM on ``--backend``, as a build's
dense_index step runs it). An exported backend (``--backend openvino-int8``, the scale
spec's) is exported once, before either cluster runs, into a folder both clusters' runs
share, and its time is printed apart: a build exports it once per cache, in the process
that runs the build (``CachedEmbedder``), whatever the cluster's size, and every later
build finds it made.

Each worker runs its model on the one CPU Ray gave it (``kgrag.host.grant_cores``), on
the one-node cluster as on the two-node one. Printed per cluster and step, from the
times each batch was sent and came back (``RayExecutor.batches``):

* ``cold_s`` and ``cold_per_s``: the step's wall seconds, the workers' start and model
  loads included (a build pays them too), and chunks per second over them;
* ``loaded_s``: seconds from the step's start until every worker had returned its
  first batch (its process started, its model loaded, one batch computed);
* ``loaded_per_s``: the steady throughput after that, inputs (chunks parsed, texts
  embedded) per second from then to the last batch's return, a batch in flight at the
  start counted by the share of its time after it;
* the batches each node computed.

Then the speed-up of two nodes over one, cold and after the load, and whether both
clusters produced the same extractions and bit-identical vectors. On a machine shared
with other work the timings are upper bounds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from llm_extraction_speed import musique_chunks

from kgrag.eval.report import format_table
from kgrag.graphs.elements import Extraction
from kgrag.graphs.extraction.nlp import Chunk, NlpExtractor
from kgrag.models.cache import CallCache
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings, runner
from kgrag.models.embed.runtime import ExportedBackend
from kgrag.models.executor import RayExecutor
from kgrag.models.pipelines import resolve_pipeline
from kgrag.models.ray_actors import Batch
from kgrag.models.registry import resolve_embedder
from tests.ray_nodes import ray_nodes

COLUMNS = ("nodes", "step", "chunks", "cold_s", "cold_per_s", "loaded_s", "loaded_per_s",
           "batches_per_node")
ALL = 10**9


def after_load(batches: list[Batch], started: float) -> tuple[float, float | None]:
    """Seconds from ``started`` until every node's worker had returned its first batch,
    and the inputs per second from then to the last batch's return (None where no batch
    ran after that): the load is in neither."""
    firsts: dict[str, float] = {}
    for batch in sorted(batches, key=lambda b: b.back):
        firsts.setdefault(batch.node, batch.back)
    loaded, end = max(firsts.values()), max(b.back for b in batches)
    if end <= loaded:
        return loaded - started, None
    done = sum(b.inputs * max(0.0, b.back - max(b.sent, loaded)) / (b.back - b.sent)
               for b in batches)
    return loaded - started, done / (end - loaded)


def one_cluster(nodes: int, chunks: list[Chunk], settings: EmbedderSettings,
                exports: CallCache) -> tuple[list[dict[str, Any]], list[Extraction], np.ndarray]:
    """The two steps on a cluster of ``nodes`` one-CPU nodes, one worker each, the
    embedder exported in ``exports``' folder."""
    rows = []
    with ray_nodes(nodes) as address, tempfile.TemporaryDirectory(
            prefix="kgrag-ray-build-") as folder:
        executor = RayExecutor(address, nodes)
        cache = CallCache(Path(folder))

        def timed(step: str, run: Any) -> Any:
            before = len(executor.batches)
            started = time.monotonic()
            result = run()
            wall = time.monotonic() - started
            batches = executor.batches[before:]
            loaded, steady = after_load(batches, started)
            per_node = Counter(b.node for b in batches)
            rows.append({"nodes": nodes, "step": step, "chunks": len(chunks),
                         "cold_s": round(wall, 1), "cold_per_s": round(len(chunks) / wall, 1),
                         "loaded_s": round(loaded, 1),
                         "loaded_per_s": "-" if steady is None else round(steady, 1),
                         "batches_per_node": "/".join(str(n) for n in sorted(
                             per_node.values(), reverse=True))})
            return result

        extractor = NlpExtractor(resolve_pipeline("en_core_web_sm"), cache, executor=executor)
        extractions = timed("nlp extraction", lambda: extractor.extract(chunks))
        embedder = CachedEmbedder(settings, cache, runner(settings, exports))
        vectors = timed(f"embedding ({settings.backend})",
                        lambda: embedder.encode([c.unit for c in chunks], executor))
        cache.close()
    return rows, extractions, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=ALL)
    parser.add_argument("--backend", default="torch")
    args = parser.parse_args()
    chunks = musique_chunks(args.chunks)
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256,
                                backend=args.backend)
    with tempfile.TemporaryDirectory(prefix="kgrag-ray-exports-") as folder:
        exports = CallCache(Path(folder))
        backend = runner(settings, exports)
        if isinstance(backend, ExportedBackend):
            started = time.monotonic()
            backend.export()
            print(f"export ({args.backend}), once for both clusters: "
                  f"{time.monotonic() - started:.1f} s")
        one, one_x, one_v = one_cluster(1, chunks, settings, exports)
        two, two_x, two_v = one_cluster(2, chunks, settings, exports)
        exports.close()
    print(format_table(one + two, COLUMNS))
    for a, b in zip(one, two):
        steady = ("-" if "-" in (a["loaded_per_s"], b["loaded_per_s"])
                  else f"{b['loaded_per_s'] / a['loaded_per_s']:.2f}x")
        print(f"{a['step']}: two nodes {b['cold_per_s'] / a['cold_per_s']:.2f}x one node "
              f"cold (model loads included), {steady} after the load")
    print(f"same extractions: {one_x == two_x}; "
          f"bit-identical vectors: {np.array_equal(one_v, two_v)}")


if __name__ == "__main__":
    main()
