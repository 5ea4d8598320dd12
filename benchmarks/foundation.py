"""Foundation benchmarks: ratios and medians measured in one run (this machine is noisy).

    python benchmarks/foundation.py                 # all four
    python benchmarks/foundation.py --only llm      # one of: warm, llm, embed, dense

warm   cold quickstart (empty cache, fresh outputs) vs a warm rerun: model calls, wall ratio
llm    CachedLLM.complete on cache misses vs direct llama-cpp-python on the same prompts
embed  CachedEmbedder.encode (empty cache) vs raw SentenceTransformer.encode, same texts
dense  naive retrieval latency over the full musique_200 corpus (index built or reused)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def temp_project(spec_text: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix="kgrag-bench-"))
    (root / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    (root / "specs").mkdir()
    (root / "specs" / "bench.yaml").write_text(spec_text)
    return root


def bench_warm() -> None:
    from kgrag import api

    spec_text = (REPO / "specs" / "quickstart.yaml").read_text().replace(
        "../corpora/", f"{REPO}/corpora/")
    root = temp_project(spec_text)
    spec = root / "specs" / "bench.yaml"
    saved = os.environ.get("KGRAG_CACHE_DIR")
    os.environ["KGRAG_CACHE_DIR"] = str(root / "cache")  # cold means an empty cache too
    try:
        cold_s, cold = timed(lambda: api.run(spec, echo=lambda s: None))
        warm_s, warm = timed(lambda: api.run(spec, echo=lambda s: None))
    finally:
        if saved is None:
            os.environ.pop("KGRAG_CACHE_DIR")
        else:
            os.environ["KGRAG_CACHE_DIR"] = saved
    calls = sum(s["llm"]["calls"] + s["embed"]["calls"] for s in warm.manifest.steps)
    cold_calls = sum(s["llm"]["calls"] for s in cold.manifest.steps)
    print(f"warm rerun: cold {cold_s:.1f}s ({cold_calls} LLM calls), warm {warm_s:.2f}s, "
          f"model calls on warm run {calls}, warm/cold = {warm_s / cold_s:.2%}")
    shutil.rmtree(root, ignore_errors=True)


def answer_prompts(n: int) -> list[str]:
    from kgrag.answer import completion_prompt

    prompts = []
    with open(REPO / "corpora" / "musique_30.jsonl") as handle:
        for line in handle:
            q = json.loads(line)
            support = [p for p in q["paragraphs"] if p["is_supporting"]][:2]
            context = "\n\n".join(f"# {p['title']}\n{p['paragraph_text']}" for p in support)
            prompts.append(completion_prompt(context, q["question"]))
    return prompts[:n]


def bench_llm(n: int = 12, rounds: int = 6) -> None:
    from kgrag.models.backend import FIXED_SAMPLING, Completion, LLMSettings
    from kgrag.models.cache import CallCache
    from kgrag.models.llamacpp import LlamaCppBackend
    from kgrag.models.llm import CachedLLM
    from kgrag.models.registry import resolve_llm

    m = resolve_llm("gemma3-270m")
    settings = LLMSettings(name=m.name, path=m.path, sha256=m.sha256, n_ctx=4096)
    backend = LlamaCppBackend(settings)
    llama = backend._model()
    prompts = answer_prompts(n)
    params = dict(max_tokens=16, temperature=0.0, top_p=1.0, seed=0, stop=["\n"],
                  **FIXED_SAMPLING)

    def direct() -> None:
        for p in prompts:
            llama.create_completion(prompt=p, **params)

    def cached() -> None:
        folder = Path(tempfile.mkdtemp(prefix="kgrag-llm-"))
        llm = CachedLLM(settings, CallCache(folder), backend)
        for p in prompts:
            llm.complete(p, max_tokens=16, stop=["\n"])
        assert llm.usage.calls == len(prompts), "every call must be a miss"
        shutil.rmtree(folder, ignore_errors=True)

    direct()  # warm-up: page the model in
    ratios, d_times, c_times = [], [], []
    for i in range(rounds):  # alternate which side goes first: llama.cpp keeps warm state
        if i % 2:
            c, _ = timed(cached)
            d, _ = timed(direct)
        else:
            d, _ = timed(direct)
            c, _ = timed(cached)
        d_times.append(d)
        c_times.append(c)
        ratios.append(c / d)
    print(f"cached LLM layer (misses), {n} prompts x {rounds} rounds: direct median "
          f"{statistics.median(d_times):.2f}s, kgrag median {statistics.median(c_times):.2f}s, "
          f"overhead {statistics.median(ratios) - 1:+.1%} (median of per-round ratios)")
    # The layer's own cost, isolated from llama.cpp's noise: the same calls through the
    # cache with a backend that answers instantly.
    instant = Completion("x", tokens_in=1, tokens_out=1, cached=False)
    folder = Path(tempfile.mkdtemp(prefix="kgrag-llm-"))
    layer = CachedLLM(settings, CallCache(folder), SimpleNamespace(generate=lambda r: instant))
    per_call, _ = timed(lambda: [layer.complete(p, max_tokens=16, stop=["\n"]) for p in prompts])
    shutil.rmtree(folder, ignore_errors=True)
    direct_per_call = statistics.median(d_times) / len(prompts)
    print(f"cached LLM layer alone: {per_call / len(prompts) * 1000:.2f} ms per miss = "
          f"{per_call / len(prompts) / direct_per_call:.2%} of a median direct call")


def bench_embed(n: int = 1000, rounds: int = 2) -> None:
    from kgrag.corpus import load_corpus
    from kgrag.models.cache import CallCache
    from kgrag.models.embed.embedder import (
        CachedEmbedder,
        EmbedderSettings,
        SentenceTransformerBackend,
    )
    from kgrag.models.registry import resolve_embedder

    cfg = {"dataset": "musique", "path": "musique_200.jsonl", "limit": None, "questions": None,
           "fields": {"id": "id", "title": "title", "text": "text"}}
    docs = load_corpus(cfg, SHARED).documents.head(n)
    texts = [f"# {t}\n{x}" for t, x in zip(docs["title"], docs["text"])]
    m = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=m.name, path=m.path, sha256=m.sha256)
    backend = SentenceTransformerBackend(settings)
    model = backend.model()
    model.encode(texts[:64])  # warm-up

    def raw() -> None:
        model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)

    def ours() -> None:
        folder = Path(tempfile.mkdtemp(prefix="kgrag-emb-"))
        CachedEmbedder(settings, CallCache(folder), backend).encode(texts)
        shutil.rmtree(folder, ignore_errors=True)

    ratios = []
    for _ in range(rounds):
        r, _ = timed(raw)
        o, _ = timed(ours)
        ratios.append(r / o)
    ratio = statistics.median(ratios)
    print(f"embedding throughput, {len(texts)} paragraphs: kgrag/raw = {ratio:.1%} "
          f"(last round raw {len(texts) / r:.0f} texts/s, kgrag {len(texts) / o:.0f} texts/s)")


def bench_dense() -> None:
    from kgrag import api

    spec = REPO / "specs" / "dense_musique200.yaml"
    result = api.run(spec, echo=lambda s: None)
    for row in result.metrics["rows"]:
        print(f"dense retrieval {row['strategy']:<10} p50 {row['retrieval_ms_p50']:.2f} ms  "
              f"p95 {row['retrieval_ms_p95']:.2f} ms  coverage {row['coverage']:.3f}  "
              f"recall@5 {row['recall@5']:.3f}  ({result.metrics['n_questions']} questions)")


BENCHES = {"warm": bench_warm, "llm": bench_llm, "embed": bench_embed, "dense": bench_dense}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(BENCHES), action="append")
    args = parser.parse_args()
    for name in args.only or list(BENCHES):
        BENCHES[name]()


if __name__ == "__main__":
    main()
