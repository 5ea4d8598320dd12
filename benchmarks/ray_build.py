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
dense_index step runs it).

Printed per cluster and step: wall seconds (the workers' start and model loads
included: a build pays them too), chunks per second, the batches each node computed;
then the speed-up of two nodes over one, and whether both clusters produced the same
extractions and bit-identical vectors. On a machine shared with other work the
timings are upper bounds.
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
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
from kgrag.models.executor import RayExecutor
from kgrag.models.pipelines import resolve_pipeline
from kgrag.models.registry import resolve_embedder
from tests.ray_nodes import ray_nodes

COLUMNS = ("nodes", "step", "chunks", "wall_s", "chunks_per_s", "batches_per_node")
ALL = 10**9


def one_cluster(nodes: int, chunks: list[Chunk], backend: str
                ) -> tuple[list[dict[str, Any]], list[Extraction], np.ndarray]:
    """The two steps on a cluster of ``nodes`` one-CPU nodes, one worker each."""
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256,
                                backend=backend)
    rows = []
    with ray_nodes(nodes) as address, tempfile.TemporaryDirectory(
            prefix="kgrag-ray-build-") as folder:
        executor = RayExecutor(address, nodes)
        cache = CallCache(Path(folder))

        def timed(step: str, run: Any) -> Any:
            before = len(executor.placements)
            started = time.perf_counter()
            result = run()
            wall = time.perf_counter() - started
            per_node = Counter(executor.placements[before:])
            rows.append({"nodes": nodes, "step": step, "chunks": len(chunks),
                         "wall_s": round(wall, 1), "chunks_per_s": round(len(chunks) / wall, 1),
                         "batches_per_node": "/".join(str(n) for n in sorted(
                             per_node.values(), reverse=True))})
            return result

        extractor = NlpExtractor(resolve_pipeline("en_core_web_sm"), cache, executor=executor)
        extractions = timed("nlp extraction", lambda: extractor.extract(chunks))
        embedder = CachedEmbedder(settings, cache)
        vectors = timed(f"embedding ({backend})",
                        lambda: embedder.encode([c.unit for c in chunks], executor))
        cache.close()
    return rows, extractions, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=ALL)
    parser.add_argument("--backend", default="torch")
    args = parser.parse_args()
    chunks = musique_chunks(args.chunks)
    one, one_x, one_v = one_cluster(1, chunks, args.backend)
    two, two_x, two_v = one_cluster(2, chunks, args.backend)
    print(format_table(one + two, COLUMNS))
    for a, b in zip(one, two):
        print(f"{a['step']}: two nodes {b['chunks_per_s'] / a['chunks_per_s']:.2f}x one node")
    print(f"same extractions: {one_x == two_x}; "
          f"bit-identical vectors: {np.array_equal(one_v, two_v)}")


if __name__ == "__main__":
    main()
