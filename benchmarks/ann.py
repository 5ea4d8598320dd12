"""Dense search at a million rows: the ANN index against the flat scan.

    PYTHONPATH=. python benchmarks/ann.py [--rows 100000 1000000] [--index ivf_hnsw_sq ivf_pq]
        [--spec outputs/scale-corpus/10k/spec.yaml] [--distractors noisy|rotated]
        [--nprobes 20 60] [--ef 0 200] [--refine 0 10]

Embedding a million chunks here takes hours, so the rows are a simulation: real base
vectors tiled to each size. The base is the real passages of shared samples
(``--samples``, musique by default: MiniLM vectors through the call cache, the question
embedded by MiniLM on PyTorch), or with ``--spec`` a built spec's dense index (every
chunk's vector) and its corpus's questions that have supporting documents (the scale
corpus's needles; the question embedded by the spec's own embedder, through a call
cache of this run's own, so each question is embedded anew as in an interactive
session). Row i < len(base) is base row i; every later row is a copy of base row
i mod len(base) (``--distractors``):

- ``noisy``: the base vector plus Gaussian noise (``--noise`` per dimension, 0.02 puts a
  copy at cosine about 0.93 from its base), renormalised. A copy stands for its passage:
  a question's passage is found when any copy of it is. Every passage gets hundreds of
  near-duplicates, so the nearest rows crowd far more than distinct text does: a worst
  case for an index.
- ``rotated``: the base vector's difference from the base's mean direction turned by a
  random rotation, one per copy of the base, the mean added back, renormalised. A copy
  keeps the base's geometry among its own rows (clusters, the shared direction every
  MiniLM vector leans to) but stands for no passage: a distractor, as distinct text is.

R@5 is kgrag's recall@5 (supporting documents among the first five distinct documents of
the ``--depth`` nearest rows, 30 by default: the scale spec's dense ``top_k``,
2 · ⌈2,000 / typical chunk tokens⌉ + 10), for the flat scan (exact, the nearest rows by a product in
memory, which is what ``VectorTable`` without an index returns; its LanceDB scan is timed
on ``--flat-timed`` questions) and for each index (``VectorTable`` with the spec's
``dense_index.ann`` settings) at each search setting of the sweep, every combination of
``--nprobes``, ``--ef`` and ``--refine`` (0: the setting left out, LanceDB's own).
The questions are split in two halves by a seeded
permutation, and R@5 is given on each: choose a search setting on the dev half, read its
figure on the test half. overlap@10: the share of the flat scan's ten rows the index
returns, over all the questions. p50 and p95 per
question include embedding the question. Build seconds are the table's write plus its
index. ``--tables DIR`` keeps each size's tables there and reuses them when run again
(building an index of a million rows takes a quarter of an hour). The machine is shared
unless said otherwise, so times are upper bounds.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.stats import special_ortho_group

from kgrag import api
from kgrag.configuration import default_cache_dir
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.corpus.importers import load_corpus
from kgrag.eval.metrics import recall_at_k
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.spec.schema import SCHEMA, fill_defaults
from kgrag.store.vectors import VectorTable, ann_settings

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SAMPLES = {"musique": "musique_200.jsonl", "hotpotqa": "hotpotqa_200.jsonl",
           "2wiki": "2wiki_200.jsonl"}
INDEXES = ("ivf_hnsw_sq", "ivf_pq")


def settings(index: str) -> dict:
    """What a spec's ``dense_index: {ann: {index: INDEX}}`` holds: the schema's defaults
    for that index type, as the dense step's fingerprint keeps them."""
    return ann_settings(fill_defaults({"index": index}, SCHEMA["$defs"]["ann"]))


@dataclass(frozen=True)
class Base:
    """Real vectors to tile: each row's document, the questions and their supporting
    documents, and how a question is embedded (as the base's vectors were)."""

    vectors: np.ndarray
    docs: list[str]
    questions: list[str]
    gold: list[list[str]]
    encode: Callable[[str], np.ndarray]

    def picked(self, n: int, seed: int) -> Base:
        """``n`` questions in a seeded order: the first half of them is the dev half."""
        chosen = np.random.default_rng(seed).permutation(len(self.questions))[:n]
        return replace(self, questions=[self.questions[i] for i in chosen],
                       gold=[self.gold[i] for i in chosen])

    def halves(self) -> tuple[slice, slice]:
        middle = (len(self.questions) + 1) // 2
        return slice(0, middle), slice(middle, None)


def sample_base(samples: list[str]) -> Base:
    """The samples' passages (a passage is its own document) and questions, MiniLM vectors
    through the call cache, questions embedded by MiniLM on PyTorch uncached."""
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
                gold.append(sorted({str(rows[d]) for d in supporting}))
    texts = [f"{title}\n{text}" for title, text in passages]
    _, embedder = bundled_embedder(CallCache(default_cache_dir()))
    vectors = np.asarray(embedder.encode(texts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    from sentence_transformers import SentenceTransformer

    from kgrag.models.registry import resolve_embedder

    model = SentenceTransformer(str(resolve_embedder("all-MiniLM-L6-v2").path), device="cpu")
    return Base(vectors, [str(i) for i in range(len(texts))], questions, gold,
                lambda text: model.encode([text], normalize_embeddings=True)[0])


def spec_base(spec: Path, cache: Path) -> Base:
    """A built spec's chunk vectors (its dense index) with their documents, and its
    questions that have supporting documents, embedded by the spec's embedder through
    ``cache`` (empty: each question is embedded anew; the exported embedder is linked in
    from the default cache, so that it is not exported again)."""
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "exported-embedders").symlink_to(default_cache_dir() / "exported-embedders")
    session = api.open_session(spec, cache=CallCache(cache))
    dense = next(s for s in session.plan.steps if s.kind == "dense_index")
    ids, vectors = VectorTable.open(session.artefact(dense.name), "chunks").matrix()
    chunks = read_chunks(session.artefact("chunks"), ["chunk_id", "doc_id"])
    doc_of = dict(zip(chunks["chunk_id"].to_list(), chunks["doc_id"].to_list()))
    questions = read_questions(session.artefact("corpus"))
    questions = questions.filter(questions["supporting_doc_ids"].list.len() > 0)
    embedder = session.models.embedder_of(dense.config["embedder"])
    return Base(np.asarray(vectors, dtype=np.float32), [doc_of[i] for i in ids],
                questions["question"].to_list(), questions["supporting_doc_ids"].to_list(),
                lambda text: embedder.encode([text])[0])


def tiled(base: np.ndarray, rows: int, noise: float, seed: int,
          distractors: str = "noisy") -> np.ndarray:
    """``rows`` unit vectors: row i < len(base) is base row i, row i later a copy of base
    row i mod len(base), noisy or rotated (the module's docstring)."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), dtype=np.float32)
    out[: min(rows, len(base))] = base[:rows]
    if distractors == "rotated":
        mean = base.mean(axis=0)
        for start in range(len(base), rows, len(base)):
            turn = special_ortho_group.rvs(base.shape[1], random_state=rng).astype(np.float32)
            block = (base[: rows - start] - mean) @ turn + mean
            out[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return out
    step = 100_000
    for start in range(len(base), rows, step):
        at = np.arange(start, min(rows, start + step))
        block = base[at % len(base)] + rng.normal(0, noise, (len(at), base.shape[1])).astype(
            np.float32)
        out[at] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def documents(base: Base, distractors: str) -> Callable[[int], str]:
    """A row's document: a noisy copy stands for its passage, a rotated one for none."""
    n = len(base.docs)
    if distractors == "rotated":
        return lambda row: base.docs[row] if row < n else f"distractor-{row}"
    return lambda row: base.docs[row % n]


def measure(table: VectorTable, questions: list[str], encode: Callable[[str], np.ndarray],
            depth: int) -> tuple[list[list[int]], list[float]]:
    """Each question's nearest rows and its time in ms, embedding included."""
    tops, times = [], []
    for question in questions:
        started = time.perf_counter()
        vector = encode(question)
        hits = table.search(vector, depth)
        times.append((time.perf_counter() - started) * 1000)
        tops.append([int(i) for i, _ in hits])
    return tops, times


def recall_at_5(tops: list[list[int]], doc_of: Callable[[int], str], base: Base) -> str:
    """R@5 on the dev half, then on the test half."""
    values = [recall_at_k([doc_of(r) for r in top], g, 5) or 0.0
              for top, g in zip(tops, base.gold)]
    return "  ".join(f"{statistics.mean(values[half]):.3f}" for half in base.halves())


def sweep(args: argparse.Namespace, ann: dict) -> list[dict]:
    """Every combination of the search settings asked for (a setting not asked for keeps
    the schema's default; 0 leaves it out, to LanceDB), but an ``ef`` under the rows a
    search fetches, which ``VectorTable.search`` raises to them."""
    chosen = []
    for nprobes, ef, refine in itertools.product(
            args.nprobes or [ann["nprobes"]], args.ef or [ann.get("ef", 0)],
            args.refine or [ann.get("refine_factor", 0)]):
        if ef and ef < args.depth * max(refine, 1):
            continue
        setting = {key: value for key, value in ann.items() if key not in ("ef", "refine_factor")}
        setting |= {"nprobes": nprobes} | ({"ef": ef} if ef else {}) | (
            {"refine_factor": refine} if refine else {})
        chosen.append(setting)
    return chosen


def label(index: str, setting: dict) -> str:
    return index + ":" + ",".join(f"{k}={setting[k]}" for k in ("nprobes", "ef", "refine_factor")
                                  if k in setting)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--index", nargs="+", default=list(INDEXES), choices=INDEXES)
    parser.add_argument("--nprobes", type=int, nargs="+", default=None,
                        help="search settings to try (default: the spec's)")
    parser.add_argument("--ef", type=int, nargs="+", default=None)
    parser.add_argument("--refine", type=int, nargs="+", default=None)
    parser.add_argument("--spec", type=Path, help="tile this built spec's dense index")
    parser.add_argument("--distractors", choices=["noisy", "rotated"], default="noisy")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--samples", nargs="+", default=["musique"], choices=list(SAMPLES))
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--depth", type=int, default=30, help="rows searched per question")
    parser.add_argument("--tables", type=Path, help="keep (and reuse) the tables here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flat-timed", type=int, default=5,
                        help="questions the flat scan is timed on (it is slow at size)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.home()) as scratch:
        base = (spec_base(args.spec, Path(scratch) / "cache") if args.spec
                else sample_base(args.samples)).picked(args.questions, args.seed)
        base.encode("warm up")
        doc_of = documents(base, args.distractors)
        print(f"base: {len(base.vectors)} real vectors, {len(base.questions)} questions; "
              f"rows tiled, {args.distractors} copies")
        print("rows  search  build_s  R@5_dev  R@5_test  overlap@10  p50_ms  p95_ms")
        for rows in args.rows:
            if args.tables:
                source = args.spec.parent.name if args.spec else "+".join(args.samples)
                run(rows, base, doc_of, args, args.tables / f"{source}-{rows}-"
                    f"{args.distractors}-{args.noise}-{args.seed}")
            else:
                with tempfile.TemporaryDirectory(dir=scratch) as folder:
                    run(rows, base, doc_of, args, Path(folder))


def table(folder: Path, index: str, ids: list[str], vectors: np.ndarray,
          ann: dict | None) -> tuple[VectorTable, str]:
    """The table in ``folder / index``, opened if a finished one is there, else built;
    with its build seconds ("kept" for one opened)."""
    if (folder / f"{index}.done").exists():
        return VectorTable.open(folder / index, "chunks"), "kept"
    started = time.perf_counter()
    built = VectorTable.create(folder / index, "chunks", ids, vectors, ann)
    (folder / f"{index}.done").touch()
    return built, f"{time.perf_counter() - started:.0f}"


def run(rows: int, base: Base, doc_of: Callable[[int], str], args: argparse.Namespace,
        folder: Path) -> None:
    """One size, its tables in ``folder``: the flat scan, then each index at each search
    setting."""
    vectors = tiled(base.vectors, rows, args.noise, args.seed, args.distractors)
    ids = [str(i) for i in range(rows)]
    folder.mkdir(parents=True, exist_ok=True)
    flat, build = table(folder, "flat", ids, vectors, None)
    # the exact nearest rows of every question by a product in memory (what the flat
    # scan returns, at a fraction of its cost); the scan is timed on a few
    exact = [list(np.argsort(-(vectors @ base.encode(q)), kind="stable")[: args.depth])
             for q in base.questions]
    _, times = measure(flat, base.questions[: args.flat_timed], base.encode, args.depth)
    print(f"{rows}  flat  {build}  {recall_at_5(exact, doc_of, base)}  "
          f"1.000  {np.percentile(times, 50):.1f}  {np.percentile(times, 95):.1f}", flush=True)
    del flat
    for index in args.index:
        ann = {**settings(index), "min_rows": 0}
        indexed, build = table(folder, index, ids, vectors, ann)
        for setting in sweep(args, ann):
            indexed.ann = setting
            tops, times = measure(indexed, base.questions, base.encode, args.depth)
            overlap = statistics.mean(len(set(t[:10]) & set(e[:10])) / 10
                                      for t, e in zip(tops, exact))
            print(f"{rows}  {label(index, setting)}  {build}  "
                  f"{recall_at_5(tops, doc_of, base)}  {overlap:.3f}  "
                  f"{np.percentile(times, 50):.1f}  {np.percentile(times, 95):.1f}", flush=True)


if __name__ == "__main__":
    main()
