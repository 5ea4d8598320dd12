"""KET-RAG's LLM-free index stages on the musique_200 chunks: time versus corpus size.

    python benchmarks/ket_graphs.py                  # 25/50/100 % of the chunks, 3 runs each
    python benchmarks/ket_graphs.py --tile 6         # the chunk list repeated 6× (~19k chunks)

Stages timed (median of ``--repeats`` runs each): KNN graph (keywords, lexical and
semantic neighbours), PageRank core selection, sub-chunk splitting, and the
keyword–sub-chunk bipartite graph. Embeddings are excluded from those timings,
because the pipeline caches them. Chunk and sentence vectors are computed once
up front through the cached MiniLM embedder, and that time is printed
separately. The slope of log(time) against log(n) shows how each stage
scales: 1 is linear, 2 is quadratic.

``--tile`` repeats the chunk list to reach KET-RAG's corpus sizes (4-20k chunks)
with real text. Repeated chunks share their vectors and sentences, so nothing
new is embedded.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from kgrag.configuration import default_cache_dir
from kgrag.corpus import Tokenizer, chunk_documents, load_corpus
from kgrag.graphs.bipartite import build_bipartite
from kgrag.graphs.core import select_core
from kgrag.graphs.knn import knn_graph
from kgrag.graphs.subchunks import split_subchunks
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.models.embed.embedder import CachedEmbedder

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
STAGES = ("knn", "pagerank", "subchunks", "bipartite")


def load_chunks(tokenizer: Tokenizer, size: int, overlap: int, tile: int) -> pl.DataFrame:
    """The musique_200 chunks, repeated ``tile`` times with unique chunk ids."""
    corpus = load_corpus(
        {"dataset": "musique", "path": "musique_200.jsonl", "limit": None, "questions": None,
         "fields": {"id": "id", "title": "title", "text": "text"}},
        SHARED_DATA,
    )
    chunks = chunk_documents(corpus.documents, tokenizer, size, overlap)
    return pl.concat([
        chunks.with_columns(chunk_id=pl.format("{}#{}", pl.col("chunk_id"), pl.lit(copy)))
        for copy in range(tile)
    ])


def embed_everything(
    chunks: pl.DataFrame, tokenizer: Tokenizer, tau: int, embedder: CachedEmbedder
) -> tuple[np.ndarray, dict[str, np.ndarray], float]:
    """Chunk vectors and a sentence → vector table for all chunks, and the seconds it took."""
    sentence_vectors: dict[str, np.ndarray] = {}

    def record(texts: list[str]) -> np.ndarray:
        vectors = embedder.encode(texts)
        sentence_vectors.update(zip(texts, vectors))
        return vectors

    started = time.perf_counter()
    chunk_vectors = embedder.encode(chunks["text"].to_list())
    build_bipartite(split_subchunks(chunks, tokenizer, tau), record)
    return chunk_vectors, sentence_vectors, time.perf_counter() - started


def run_stages(
    chunks: pl.DataFrame, vectors: np.ndarray, tokenizer: Tokenizer,
    lookup: Callable[[list[str]], np.ndarray], args: argparse.Namespace,
) -> dict[str, float]:
    """One timed pass over the four stages; returns seconds per stage."""
    seconds = {}
    started = time.perf_counter()
    graph = knn_graph(chunks["text"].to_list(), vectors, args.k)
    seconds["knn"] = time.perf_counter() - started
    started = time.perf_counter()
    select_core(graph, args.beta, "pagerank")
    seconds["pagerank"] = time.perf_counter() - started
    started = time.perf_counter()
    subchunks = split_subchunks(chunks, tokenizer, args.tau)
    seconds["subchunks"] = time.perf_counter() - started
    started = time.perf_counter()
    build_bipartite(subchunks, lookup)
    seconds["bipartite"] = time.perf_counter() - started
    return seconds


def slope(sizes: list[int], times: list[float]) -> float:
    """Least-squares slope of log(time) against log(n)."""
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tile", type=int, default=1, help="repeat the chunk list N times")
    parser.add_argument("--size", type=int, default=256, help="chunk size in tokens")
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--k", type=int, default=2, help="K of the KNN graph")
    parser.add_argument("--beta", type=float, default=0.8)
    parser.add_argument("--tau", type=int, default=1, help="2^tau sub-chunks per chunk")
    args = parser.parse_args()

    cache = CallCache(default_cache_dir())
    tokenizer, embedder = bundled_embedder(cache)
    chunks = load_chunks(tokenizer, args.size, args.overlap, args.tile)
    vectors, sentence_vectors, embed_s = embed_everything(chunks, tokenizer, args.tau, embedder)
    print(f"embedding {chunks.height} chunks and {len(sentence_vectors)} distinct sentences: "
          f"{embed_s:.1f}s ({embedder.usage.calls} encoded, {embedder.usage.cache_hits} "
          f"from the cache)")

    def lookup(texts: list[str]) -> np.ndarray:
        return np.stack([sentence_vectors[text] for text in texts])

    print(f"K={args.k} β={args.beta} τ={args.tau}, median of {args.repeats} runs, seconds")
    print(f"{'n':>7} " + " ".join(f"{stage:>10}" for stage in STAGES) + f" {'total':>10}")
    sizes: list[int] = []
    medians: dict[str, list[float]] = {stage: [] for stage in (*STAGES, "total")}
    for fraction in args.fractions:
        n = math.ceil(fraction * chunks.height)
        runs = [run_stages(chunks.head(n), vectors[:n], tokenizer, lookup, args)
                for _ in range(args.repeats)]
        for run in runs:
            run["total"] = sum(run.values())
        sizes.append(n)
        for stage, values in medians.items():
            values.append(statistics.median(run[stage] for run in runs))
        print(f"{n:>7} " + " ".join(f"{medians[s][-1]:>10.3f}" for s in (*STAGES, "total")))
    if len(sizes) > 1:
        print(f"{'slope':>7} " + " ".join(f"{slope(sizes, medians[s]):>10.2f}"
                                          for s in (*STAGES, "total")))
    cache.close()


if __name__ == "__main__":
    main()
