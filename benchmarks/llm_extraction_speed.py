"""LLM extraction speed: the full-mask path against faster variants, same chunks, one run.

    flock /tmp/kgrag-bench.lock python benchmarks/llm_extraction_speed.py
    python benchmarks/llm_extraction_speed.py --chunks 10 --variants llm-chat hybrid-chat

The chunks are the first ``--chunks`` (default 40) of musique_200 cut as a spec cuts
them (256 tokens, overlap 32: the real importer and chunker; the LLM reads each chunk's
``# <title>`` unit and spaCy its text and title, as in a build), one SmolLM2 135M
loaded once and shared by every variant, each variant through its own
fresh call cache, so every call really runs and every output is validated as in a
build. The first call of each variant evaluates its shared prompt prefix; later calls
reuse it at 64-token blocks (``AlignedLlama``), as in a build.

Variants (``--variants``); "full mask" is llama-cpp-python's grammar check (every
token of the vocabulary masked at every step, kgrag's path before greedy first),
"greedy first" checks the greedy token first and masks only when the grammar rejects it
(``kgrag.models.greedy_grammar``, now the default):
  llm-chat        the KET specs' requests: ``method: llm``, ``prompt: chat``,
                  caps 4/4, full mask (the baseline)
  llm-chat-greedy-first   the same requests, greedy first
  llm-completion  ``prompt: completion`` (the schema's default), full mask
  llm-caps-2      fewer output tokens: ``max_entities: 2, max_relationships: 2``, full mask
  hybrid-chat     ``method: hybrid``, chat: spaCy entities, one call writing triples,
                  full mask
  hybrid-chat-greedy-first  the same, greedy first
  hybrid-completion-greedy-first  in completion style, greedy first
  no-grammar      the llm-chat request without its grammar, on the first ``--probe``
                  chunks: decoding with no grammar check at all (a bound for any cheaper
                  check); "parsed" is the share of outputs that are a JSON object at all

Figures per variant: chunks per minute over the whole variant (hybrid's spaCy parses
included), the median seconds per chunk, prompt and output tokens per chunk, output
tokens per second of call time, the share of chunks whose first output was valid,
entities and relationships kept per chunk, the speed-up over ``llm-chat``, and for a
greedy-first variant the share of chunks whose extraction equals its full-mask twin's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.corpus import chunk_documents, load_corpus
from kgrag.corpus.tokenizer import Tokenizer
from kgrag.eval.report import format_table
from kgrag.graphs.elements import Extraction
from kgrag.graphs.extraction.hybrid import relate
from kgrag.graphs.extraction.llm import extract
from kgrag.graphs.extraction.nlp import Chunk, NlpExtractor
from kgrag.graphs.extraction.prompt import chat_messages, max_output_tokens
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.llm import CachedLLM
from kgrag.models.pipelines import load_pipeline, resolve_pipeline
from kgrag.models.registry import resolve_embedder, resolve_llm

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "musique_200.jsonl"
BASELINE = "llm-chat"
TWINS = {"llm-chat-greedy-first": "llm-chat", "hybrid-chat-greedy-first": "hybrid-chat"}
COLUMNS = ("variant", "chunks", "chunks_per_min", "s_per_chunk_median", "tokens_in",
           "tokens_out", "out_tokens_per_s", "parsed_first_try", "entities", "relationships",
           "speedup", "same_outputs")


def musique_chunks(count: int) -> list[Chunk]:
    """The first ``count`` chunks of musique_200 at the default chunking (256 / 32, titled)."""
    corpus = load_corpus({"dataset": "musique", "path": str(DATA), "limit": None,
                          "questions": None}, DATA.parent)
    tokenizer = Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)
    chunks = chunk_documents(corpus.documents, tokenizer, 256, 32).head(count)
    chunks = chunks.join(corpus.documents.select("doc_id", "title"), on="doc_id", how="left",
                         maintain_order="left")
    return [Chunk(chunk_id, text, title) for chunk_id, title, text
            in chunks.select("chunk_id", "title", "text").iter_rows()]


@dataclass
class Call:
    seconds: float
    tokens_in: int
    tokens_out: int
    parsed_first_try: bool
    result: Extraction | None


def timed(llm: CachedLLM, work: Callable[[], tuple[bool, Extraction | None]]) -> Call:
    before = llm.usage.snapshot()
    started = time.perf_counter()
    parsed, result = work()
    seconds = time.perf_counter() - started
    used = llm.usage.since(before)
    return Call(seconds, used.tokens_in, used.tokens_out, parsed, result)


def kept(x: Extraction) -> tuple[bool, Extraction]:
    return x.attempts == 1 and not x.failed, x


def run_llm(llm: CachedLLM, chunks: list[Chunk], **options: Any) -> list[Call]:
    return [timed(llm, lambda c=c: kept(extract(llm, c.chunk_id, c.unit, **options)))
            for c in chunks]


def run_hybrid(llm: CachedLLM, chunks: list[Chunk], style: str, cache: CallCache) -> list[Call]:
    """Each chunk's share of the batched spaCy parse is added to its call."""
    pipeline = resolve_pipeline("en_core_web_sm")
    nlp = load_pipeline(pipeline)  # loaded outside the timed part, as the model is
    started = time.perf_counter()
    parsed = NlpExtractor(pipeline, cache, load=lambda _: nlp).extract(chunks)
    share = (time.perf_counter() - started) / len(chunks)
    calls = []
    for chunk, extraction in zip(chunks, parsed):
        call = timed(llm, lambda c=chunk, x=extraction: kept(
            relate(llm, x, c.unit, style=style).extraction))
        call.seconds += share
        calls.append(call)
    return calls


def run_without_grammar(llm: CachedLLM, chunks: list[Chunk]) -> list[Call]:
    def one(chunk: Chunk) -> tuple[bool, None]:
        text = llm.chat(chat_messages(chunk.unit), max_tokens=max_output_tokens()).text
        try:
            value = json.loads(text)
        except ValueError:
            return False, None
        return isinstance(value, dict), None

    return [timed(llm, lambda c=c: one(c)) for c in chunks]


Run = Callable[[CachedLLM, list[Chunk], CallCache], list[Call]]
# variant → (greedy first, what it runs)
VARIANTS: dict[str, tuple[bool, Run]] = {
    "llm-chat": (False, lambda llm, chunks, _: run_llm(llm, chunks, style="chat")),
    "llm-chat-greedy-first": (True, lambda llm, chunks, _: run_llm(llm, chunks, style="chat")),
    "llm-completion": (False, lambda llm, chunks, _: run_llm(llm, chunks, style="completion")),
    "llm-caps-2": (False, lambda llm, chunks, _: run_llm(llm, chunks, style="chat",
                                                         max_entities=2, max_relationships=2)),
    "hybrid-chat": (False, lambda llm, chunks, cache: run_hybrid(llm, chunks, "chat", cache)),
    "hybrid-chat-greedy-first": (True, lambda llm, chunks, cache: run_hybrid(
        llm, chunks, "chat", cache)),
    "hybrid-completion-greedy-first": (True, lambda llm, chunks, cache: run_hybrid(
        llm, chunks, "completion", cache)),
    "no-grammar": (False, lambda llm, chunks, _: run_without_grammar(llm, chunks)),
}


def row(variant: str, calls: list[Call]) -> dict[str, Any]:
    n, total = len(calls), sum(c.seconds for c in calls)
    out = sum(c.tokens_out for c in calls)
    return {"variant": variant, "chunks": n, "chunks_per_min": round(60 * n / total, 1),
            "s_per_chunk_median": round(statistics.median(c.seconds for c in calls), 2),
            "tokens_in": round(sum(c.tokens_in for c in calls) / n),
            "tokens_out": round(out / n, 1), "out_tokens_per_s": round(out / total, 1),
            "parsed_first_try": round(sum(c.parsed_first_try for c in calls) / n, 3),
            "entities": round(sum(len(c.result.entities) for c in calls if c.result) / n, 2),
            "relationships": round(sum(len(c.result.relationships) for c in calls if c.result)
                                   / n, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS),
                        default=["llm-chat", "llm-chat-greedy-first", "hybrid-chat",
                                 "hybrid-chat-greedy-first", "no-grammar"])
    parser.add_argument("--probe", type=int, default=5,
                        help="chunks of the no-grammar variant (default %(default)s)")
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args()
    chunks = musique_chunks(args.chunks)
    model = resolve_llm(args.model)
    settings = LLMSettings(name=model.name, path=model.path, sha256=model.sha256, n_ctx=4096)
    backend = LlamaCppBackend(settings)  # one model in memory for every variant
    rows, results = [], {}
    with tempfile.TemporaryDirectory(prefix="kgrag-speed-") as root:
        CachedLLM(settings, CallCache(Path(root) / "load"), backend).complete("Hi", max_tokens=1)
        for variant in args.variants:
            backend.greedy_first, run = VARIANTS[variant]
            cache = CallCache(Path(root) / variant)
            some = chunks[:args.probe] if variant == "no-grammar" else chunks
            calls = run(CachedLLM(settings, cache, backend), some, cache)
            rows.append(row(variant, calls))
            results[variant] = [c.result for c in calls]
            twin = results.get(TWINS.get(variant, ""))
            if twin is not None:
                rows[-1]["same_outputs"] = round(
                    sum(a == b for a, b in zip(results[variant], twin)) / len(twin), 3)
            print(f"  {variant}: {rows[-1]['chunks_per_min']} chunks/min", file=sys.stderr,
                  flush=True)
    base = next((r["chunks_per_min"] for r in rows if r["variant"] == BASELINE), None)
    for r in rows:
        r["speedup"] = round(r["chunks_per_min"] / base, 2) if base else None
    print(format_table(rows, COLUMNS))


if __name__ == "__main__":
    main()
