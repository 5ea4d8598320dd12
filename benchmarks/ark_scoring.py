"""ARK's alignment scoring: where the time per (question, unit) pair goes, and the fast
path against the reference one on a fixed set of real pairs.

    flock /tmp/kgrag-cpu.lock python benchmarks/ark_scoring.py [--questions 4] [--units 5]
        [--rounds 3] [--model smollm2-135m]

The pairs: the first ``--questions`` MuSiQue questions of musique_200, each with its
supporting paragraphs then its other paragraphs up to ``--units`` units ("# title" and
the text, as chunks read); each pair is ARK's forward and backward prompt (two
log-probability requests).

Printed: (1) the reference path's profile per pair: tokenising, prompt evaluation with
every position's logits (``logits_all``), the same evaluation without them (so the
difference is what keeping the logits costs), the log-softmax, and the call cache around
the call (``CachedLLM`` over a fresh cache, less the backend); (2)
seconds per pair of the reference path and of ``LlamaCppBackend.logprobs`` (a question's
requests in one batch, as ``score_units`` sends them), the median of ``--rounds``
rounds each, interleaved in one process, and their ratio; (3) the largest absolute
difference between the two paths' scores. Timings on a shared machine are upper bounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.training's reference

from kgrag.host import usable_cores
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llamacpp import PROMPT_BLOCK, LlamaCppBackend, _aligned_llama, block_prefix
from kgrag.models.llm import CachedLLM
from kgrag.models.registry import resolve_llm
from tests.training.reference_scorer import ReferenceScorer, fixed_pairs


def profile(settings: LLMSettings, threads: int, requests: list[dict]) -> dict[str, float]:
    """Seconds per pair of each part of the reference path (see the module doc); the two
    evaluations alternate request by request, so other load on the machine falls on
    both alike."""
    parts = dict.fromkeys(("tokenise", "evaluate (logits_all)", "evaluate (no logits)",
                           "log-softmax", "call cache"), 0.0)
    tokens_evaluated = 0
    models = {keep: _aligned_llama()(model_path=str(settings.path), n_ctx=1024,
                                     n_batch=PROMPT_BLOCK, n_threads=threads,
                                     logits_all=keep, verbose=False)
              for keep in (True, False)}
    for request in requests:
        for keep, llama in models.items():
            start = time.perf_counter()
            context = llama.tokenize(request["context"].encode(), add_bos=True,
                                     special=False)
            target = llama.tokenize(request["target"].encode(), add_bos=False, special=False)
            tokens = context + target
            if keep:
                parts["tokenise"] += time.perf_counter() - start
            start = time.perf_counter()
            llama.n_tokens = block_prefix(llama.input_ids[:llama.n_tokens], tokens,
                                          PROMPT_BLOCK)
            if keep:
                tokens_evaluated += len(tokens) - llama.n_tokens
            llama.eval(tokens[llama.n_tokens:])
            parts["evaluate (logits_all)" if keep else "evaluate (no logits)"] += (
                time.perf_counter() - start)
            if keep:
                start = time.perf_counter()
                logits = np.asarray(llama.scores[len(context) - 1:len(tokens) - 1],
                                    dtype=np.float64)
                peak = logits.max(axis=1, keepdims=True)
                _ = peak[:, 0] + np.log(np.exp(logits - peak).sum(axis=1))
                parts["log-softmax"] += time.perf_counter() - start
    reference = ReferenceScorer(settings, threads)
    timed = TimedBackend(reference)
    with tempfile.TemporaryDirectory() as folder:
        llm = CachedLLM(settings, CallCache(Path(folder)), timed)
        start = time.perf_counter()
        for request in requests:
            llm.logprobs([(request["context"], request["target"])])
        parts["call cache"] = time.perf_counter() - start - timed.seconds
    pairs = len(requests) / 2
    return {**{name: seconds / pairs for name, seconds in parts.items()},
            "tokens evaluated per pair": tokens_evaluated / pairs}


class TimedBackend:
    """The reference scorer as a backend, its own seconds counted."""

    def __init__(self, reference: ReferenceScorer) -> None:
        self.reference, self.seconds = reference, 0.0

    def logprobs(self, requests: list[dict]) -> list[dict]:
        start = time.perf_counter()
        out = [self.reference.logprob(r) for r in requests]
        self.seconds += time.perf_counter() - start
        return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--units", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args(argv)
    model = resolve_llm(args.model)
    threads = usable_cores()
    settings = LLMSettings(name=model.name, path=model.path, sha256=model.sha256, n_ctx=4096,
                           n_threads=threads)
    per_question = fixed_pairs(args.questions, args.units)
    requests = [r for q in per_question for r in q]
    pairs = len(requests) // 2
    print(f"{args.model}, {threads} threads, {args.questions} MuSiQue questions x "
          f"{args.units} units = {pairs} pairs ({len(requests)} requests)")

    print("\nreference path, per pair (seconds, then tokens):")
    for name, value in profile(settings, threads, requests).items():
        print(f"  {name:<26} {value:.4f}")

    reference = ReferenceScorer(settings, threads)
    fast = LlamaCppBackend(settings)
    reference.logprob(requests[0])  # both models loaded before timing
    fast.logprobs(requests[:1])
    fast._scoring.tokens_evaluated = 0
    old_times, new_times, old, new = [], [], [], []
    for _ in range(args.rounds):  # question by question, the two paths in turn
        old, new, old_s, new_s = [], [], 0.0, 0.0
        for question in per_question:
            start = time.perf_counter()
            old += [reference.logprob(r)["mean"] for r in question]
            old_s += time.perf_counter() - start
            start = time.perf_counter()
            new += [s["mean"] for s in fast.logprobs(question)]
            new_s += time.perf_counter() - start
        old_times.append(old_s / pairs)
        new_times.append(new_s / pairs)
    old_s, new_s = statistics.median(old_times), statistics.median(new_times)
    print(f"\nseconds per pair (median of {args.rounds} rounds): reference {old_s:.4f}, "
          f"fast {new_s:.4f}, ratio {old_s / new_s:.2f}x")
    print(f"tokens evaluated per pair by the fast path: "
          f"{fast._scoring.tokens_evaluated / (pairs * args.rounds):.1f}")
    print(f"max |score difference| over {len(requests)} requests: "
          f"{max(abs(a - b) for a, b in zip(old, new)):.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
