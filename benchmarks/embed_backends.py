"""The embedder's backends side by side: speed, distance from torch's vectors, recall.

    python benchmarks/embed_backends.py speed [--texts 2000] [--repeats 3] [--threads 2]
    python benchmarks/embed_backends.py recall [--max-length 128]

``speed`` encodes the same real chunks (the shared MuSiQue sample's, chunked as a spec
chunks them) with every backend in one process, longest first in batches of 64 as the
cached embedder sends them, and prints texts per second (the median of ``--repeats``
runs after one warm-up batch), each backend's speed-up over torch, the largest cosine
distance of its vectors from torch's, the tokeniser's own rate, and the 6,753-chunk
dense index's estimated time. ``--threads`` runs each runtime on that many threads
(give several, comma-separated, to compare). Exports are made, once, under ``--out``.

``recall`` embeds the chunks and questions of the three shared multi-hop samples
(MuSiQue, HotpotQA, 2Wiki) with every backend through kgrag's cached embedder (a cache
under ``--out``, so an interrupted run resumes), ranks every chunk by cosine per
question and prints R@5 (supporting documents among the first five distinct documents,
as kgrag's ``recall@5``). ``--max-length`` also ranks with each exported backend
truncating texts to that many tokens (uncached).

Timings beside other work are upper bounds; ratios are meaningful within one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from kgrag import api
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.eval.metrics import recall_at_k
from kgrag.models.cache import CallCache
from kgrag.models.embed.backends import BACKENDS, TORCH
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings, SentenceTransformerBackend
from kgrag.models.embed.runtime import ExportedBackend, ModuleConfig, calibration_texts
from kgrag.models.registry import resolve_embedder
from kgrag.pipeline.runner import run_plan

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SAMPLES = {"musique": "musique_200.jsonl", "hotpotqa": "hotpotqa_200.jsonl",
           "2wiki": "2wiki_200.jsonl"}
BATCH = 64
HELD_OUT_CHUNKS = 6753  # the held-out 2Wiki corpus whose dense index the target names


def chunked(dataset: str, out: Path) -> tuple[list[str], list[str], list[str], list[list[str]]]:
    """The sample's chunks (texts, their document ids) and questions (texts, supporting
    document ids), made by kgrag's own import and chunk steps from a spec's defaults."""
    specs = out / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    spec = specs / f"{dataset}.yaml"
    spec.write_text(f"name: embed-backends-{dataset}\n"
                    f"corpus: {{dataset: {dataset}, path: {DATA / SAMPLES[dataset]}}}\n"
                    "query: [{name: dense, strategy: naive, top_k: 5}]\n"
                    "answer: {questions: 0}\nevaluate: {metrics: [recall@5]}\n")
    session = api.open_session(spec, root=out, cache=CallCache(out / "cache"))
    run_plan(session.plan, spec=session.spec, models=session.models, run_dir=session.run_dir,
             steps=session.plan.upstream(["chunks"]), echo=lambda _: None)
    chunks = read_chunks(session.artefact("chunks"), ["doc_id", "context"])
    questions = read_questions(session.artefact("corpus"))
    return (chunks["context"].to_list(), chunks["doc_id"].to_list(),
            questions["question"].to_list(), questions["supporting_doc_ids"].to_list())


def runner(name: str, threads: int, out: Path, max_length: int | None = None):
    """The backend ``name`` on ``threads`` threads, exported under ``out`` once."""
    model = resolve_embedder("all-MiniLM-L6-v2")
    if name == TORCH:
        torch.set_num_threads(threads)
        st = SentenceTransformerBackend(EmbedderSettings(model.name, model.path, model.sha256,
                                                         batch_size=BATCH))
        if max_length is not None:
            st.model().max_seq_length = max_length
        return st
    return ExportedBackend(model.path, model.sha256, BACKENDS[name], out / "exported",
                           calibration_texts, threads=threads, max_length=max_length)


def encode_all(backend, texts: list[str]) -> np.ndarray:
    """``texts`` (sorted longest first) in batches, as ``CachedEmbedder`` sends them."""
    return np.concatenate([backend.encode(texts[i:i + BATCH])
                           for i in range(0, len(texts), BATCH)])


def speed(args: argparse.Namespace) -> None:
    texts, *_ = chunked("musique", args.out)
    texts = sorted(texts[:args.texts], key=len, reverse=True)
    config = ModuleConfig.read(resolve_embedder("all-MiniLM-L6-v2").path)
    tokenise = config.tokeniser()
    started = time.perf_counter()
    lengths = [int(tokenise(texts[i:i + BATCH])["attention_mask"].sum())
               for i in range(0, len(texts), BATCH)]
    rate = len(texts) / (time.perf_counter() - started)
    print(f"{len(texts)} MuSiQue chunks, {sum(lengths) / len(texts):.0f} tokens each on "
          f"average (max_length {config.max_length}); tokeniser alone: {rate:.0f} texts/s\n")
    print("| backend | threads | texts/s (median) | vs torch | max cosine distance to torch "
          "| 6,753-chunk index, s |")
    print("|---|---|---|---|---|---|")
    reference: np.ndarray | None = None
    base: dict[int, float] = {}
    for threads in args.threads:
        for name in args.backends:
            backend = runner(name, threads, args.out)
            backend.encode(texts[:BATCH])  # warm-up: loads (and exports, the first time)
            times, vectors = [], None
            for _ in range(args.repeats):
                started = time.perf_counter()
                vectors = encode_all(backend, texts)
                times.append(time.perf_counter() - started)
            rate = len(texts) / statistics.median(times)
            if name == TORCH and reference is None:
                reference = vectors
            base.setdefault(threads, rate) if name == TORCH else None
            distance = (float(1 - (vectors * reference).sum(axis=1).min())
                        if reference is not None else float("nan"))
            ratio = rate / base[threads] if threads in base else float("nan")
            print(f"| {name} | {threads} | {rate:.1f} | {ratio:.2f}x | {distance:.2g} | "
                  f"{HELD_OUT_CHUNKS / rate:.0f} |", flush=True)


def recall(args: argparse.Namespace) -> None:
    model = resolve_embedder("all-MiniLM-L6-v2")
    cache = CallCache(args.out / "cache")
    variants = [(name, None) for name in args.backends]
    if args.max_length:
        variants += [(name, args.max_length) for name in args.backends if name != TORCH]
    print("| backend | max_length | " + " | ".join(f"R@5 {d}" for d in SAMPLES) +
          " | worst change vs torch, points |")
    print("|---|---|" + "---|" * (len(SAMPLES) + 1))
    samples = {d: chunked(d, args.out) for d in SAMPLES}
    torch_recall: dict[str, float] = {}
    for name, max_length in variants:
        row = {}
        for dataset, (texts, docs, questions, supporting) in samples.items():
            if max_length is None:
                settings = EmbedderSettings(model.name, model.path, model.sha256,
                                            batch_size=BATCH, backend=name)
                encode = CachedEmbedder(settings, cache,
                                        runner(name, args.threads[0], args.out)).encode
            else:
                encode = runner(name, args.threads[0], args.out, max_length).encode
            scores = encode(questions) @ encode(texts).T
            ranked = np.argsort(-scores, axis=1, kind="stable")[:, :50]
            values = [recall_at_k([docs[j] for j in order], gold, 5)
                      for order, gold in zip(ranked, supporting)]
            row[dataset] = 100 * float(np.mean([v for v in values if v is not None]))
        if name == TORCH and max_length is None:
            torch_recall = row
        worst = min(row[d] - torch_recall[d] for d in SAMPLES) if torch_recall else float("nan")
        print(f"| {name} | {max_length or 'model'} | " +
              " | ".join(f"{row[d]:.1f}" for d in SAMPLES) + f" | {worst:+.1f} |", flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("part", choices=["speed", "recall"])
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        type=lambda s: s.split(","), help="comma-separated; torch first")
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default=[2], type=lambda s: [int(t) for t in s.split(",")])
    parser.add_argument("--max-length", type=int)
    parser.add_argument("--out", type=Path, default=Path("outputs/embed_backends"))
    args = parser.parse_args(argv)
    (speed if args.part == "speed" else recall)(args)


if __name__ == "__main__":
    main(sys.argv[1:])
