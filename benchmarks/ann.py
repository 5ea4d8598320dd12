"""Dense search at a million rows: the ANN index against the flat scan.

    PYTHONPATH=. python benchmarks/ann.py [--rows 100000 1000000] [--index ivf_hnsw_sq ivf_pq]

Embedding a million chunks here takes hours, so the rows are a simulation: the real
passages of shared samples (``--samples``, musique by default: MiniLM vectors through
the call cache) tiled to each size, every copy its base vector plus Gaussian noise
(``--noise`` per dimension, 0.02 puts a copy at cosine about 0.93 from its base) and
renormalised. A question's supporting passages are found when any copy of them is
among the top five rows: R@5 over the samples' questions, for the flat scan (exact,
the top ten by a product in memory, which is what ``VectorTable`` without an index
returns; its LanceDB scan is timed on ``--flat-timed`` questions) and for each index (``VectorTable`` with the spec's
``dense_index.ann`` settings). overlap@10: the share of the flat scan's ten rows the
index returns. p50 and p95 per question include embedding the question (MiniLM on
PyTorch, uncached, as an interactive session pays it). Build seconds are the table's
write plus its index. The machine is shared, so times are upper bounds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kgrag.configuration import default_cache_dir
from kgrag.corpus.importers import load_corpus
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.store.vectors import VectorTable

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SAMPLES = {"musique": "musique_200.jsonl", "hotpotqa": "hotpotqa_200.jsonl",
           "2wiki": "2wiki_200.jsonl"}
# what the spec's dense_index.ann holds, per index type (the schema's defaults)
SETTINGS = {
    "ivf_hnsw_sq": {"index": "ivf_hnsw_sq", "m": 20, "ef_construction": 300, "nprobes": 20},
    "ivf_pq": {"index": "ivf_pq", "nprobes": 20, "refine_factor": 10},
}


def real_vectors(samples: list[str]
                 ) -> tuple[list[str], np.ndarray, list[str], list[set[int]]]:
    """The samples' passages and questions: passage texts and their unit vectors, the
    questions, and each question's supporting passages (rows of the passages)."""
    passages: dict[tuple[str, str], int] = {}
    questions, gold = [], []
    for dataset in samples:
        corpus = load_corpus({"dataset": dataset, "path": SAMPLES[dataset], "limit": None,
                              "questions": None}, SHARED_DATA)
        rows = {}
        for doc_id, title, text in corpus.documents.select("doc_id", "title", "text").iter_rows():
            rows[doc_id] = passages.setdefault((title, text), len(passages))
        for question, supporting in corpus.questions.select(
                "question", "supporting_doc_ids").iter_rows():
            if supporting:
                questions.append(question)
                gold.append({rows[d] for d in supporting})
    texts = [f"{title}\n{text}" for title, text in passages]
    _, embedder = bundled_embedder(CallCache(default_cache_dir()))
    vectors = np.asarray(embedder.encode(texts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors, questions, gold


def tiled(base: np.ndarray, rows: int, noise: float, seed: int) -> np.ndarray:
    """``rows`` unit vectors: row i is base row i mod len(base) plus noise (row i < len
    is the base row itself)."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), dtype=np.float32)
    step = 100_000
    for start in range(0, rows, step):
        at = np.arange(start, min(rows, start + step))
        block = base[at % len(base)] + rng.normal(0, noise, (len(at), base.shape[1])).astype(
            np.float32) * (at >= len(base))[:, None]
        out[at] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def measure(table: VectorTable, questions: list[str], encode: Callable[[str], np.ndarray]
            ) -> tuple[list[list[int]], list[float]]:
    """Each question's top ten rows and its time in ms, embedding included."""
    tops, times = [], []
    for question in questions:
        started = time.perf_counter()
        vector = encode(question)
        hits = table.search(vector, 10)
        times.append((time.perf_counter() - started) * 1000)
        tops.append([int(i) for i, _ in hits])
    return tops, times


def recall_at_5(tops: list[list[int]], base_rows: int, gold: list[set[int]]) -> float:
    return statistics.mean(len({r % base_rows for r in top[:5]} & g) / len(g)
                           for top, g in zip(tops, gold))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--index", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--nprobes", type=int, nargs="+", default=None,
                        help="search settings to try (default: the spec's)")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--samples", nargs="+", default=["musique"], choices=list(SAMPLES))
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flat-timed", type=int, default=5,
                        help="questions the flat scan is timed on (it is slow at size)")
    args = parser.parse_args()
    _, base, questions, gold = real_vectors(args.samples)
    picked = np.random.default_rng(args.seed).permutation(len(questions))[: args.questions]
    questions, gold = [questions[i] for i in picked], [gold[i] for i in picked]
    from sentence_transformers import SentenceTransformer

    from kgrag.models.registry import resolve_embedder

    model = SentenceTransformer(str(resolve_embedder("all-MiniLM-L6-v2").path), device="cpu")

    def encode(text: str) -> np.ndarray:
        return model.encode([text], normalize_embeddings=True)[0]

    encode("warm up")
    print(f"base: {len(base)} real passages (MiniLM), {len(questions)} questions; "
          f"rows tiled with noise {args.noise}")
    print("rows  search  build_s  R@5  overlap@10  p50_ms  p95_ms")
    for rows in args.rows:
        vectors = tiled(base, rows, args.noise, args.seed)
        ids = [str(i) for i in range(rows)]
        with tempfile.TemporaryDirectory(dir=Path.home()) as folder:
            started = time.perf_counter()
            flat = VectorTable.create(Path(folder) / "flat", "chunks", ids, vectors)
            build = time.perf_counter() - started
            # the exact top ten of every question by a product in memory (what the flat
            # scan returns, at a fraction of its cost); the scan is timed on a few
            exact = [list(np.argsort(-(vectors @ encode(q)), kind="stable")[:10])
                     for q in questions]
            _, times = measure(flat, questions[: args.flat_timed], encode)
            print(f"{rows}  flat  {build:.0f}  {recall_at_5(exact, len(base), gold):.3f}  "
                  f"1.000  {np.percentile(times, 50):.1f}  {np.percentile(times, 95):.1f}",
                  flush=True)
            for index in args.index:
                ann = {**SETTINGS[index], "min_rows": 0}
                started = time.perf_counter()
                table = VectorTable.create(Path(folder) / index, "chunks", ids, vectors, ann)
                build = time.perf_counter() - started
                for nprobes in args.nprobes or [ann["nprobes"]]:
                    table.ann = {**table.ann, "nprobes": nprobes}
                    tops, times = measure(table, questions, encode)
                    overlap = statistics.mean(len(set(t) & set(e)) / len(e)
                                              for t, e in zip(tops, exact))
                    print(f"{rows}  {index}:nprobes={nprobes}  {build:.0f}  "
                          f"{recall_at_5(tops, len(base), gold):.3f}  {overlap:.3f}  "
                          f"{np.percentile(times, 50):.1f}  {np.percentile(times, 95):.1f}",
                          flush=True)


if __name__ == "__main__":
    main()
