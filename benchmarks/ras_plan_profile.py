"""Where a few-shot RAS loop's seconds go, question by question, on uncached calls.

    python benchmarks/ras_plan_profile.py specs/ras_scale_musique.yaml [--row ras] [--questions 2]

Runs the loop of the ras row named (few-shot planning) on the first questions its
retrieve step reads, through a fresh, empty call cache (so every plan call reaches
llama.cpp), and prints per plan call: the prompt's tokens, how many of them kept the
previous call's evaluation (the block-aligned common prefix), llama.cpp's prompt
evaluation and decode milliseconds and token counts (``llama_perf_context``), the
threads it ran, and the call's wall time; then per question the loop's wall time split
into prompt evaluation, decode, the rest of the call (grammar, sampling, Python) and
the loop without the LLM (retrieval, triples, merge). The row's artefacts upstream
(chunks, index) must exist: run the row once (``benchmarks/ras_halves.py --run``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.models.cache import CallCache
from kgrag.models.llamacpp import block_prefix
from kgrag.steps.retrieve import load_strategy
from kgrag.training.split import held_out


def profiled(backend, calls: list[dict]):
    """``backend.generate`` that appends one record per call to ``calls``."""
    import llama_cpp

    plain = backend.generate

    def generate(request: dict) -> object:
        llama = backend._model()
        # a chat request's tokens are the template's: its kept prefix is not shown
        tokens = llama.tokenize(request["prompt"].encode()) if "prompt" in request else []
        kept = block_prefix(llama._input_ids, tokens, llama.n_batch) if tokens else None
        llama_cpp.llama_perf_context_reset(llama.ctx)
        started = time.perf_counter()
        out = plain(request)
        wall = (time.perf_counter() - started) * 1000
        perf = llama_cpp.llama_perf_context(llama.ctx)
        calls.append({"prompt_tokens": out.tokens_in, "kept": kept,
                      "p_eval_tokens": perf.n_p_eval, "p_eval_ms": round(perf.t_p_eval_ms, 1),
                      "decode_tokens": perf.n_eval, "decode_ms": round(perf.t_eval_ms, 1),
                      "threads": llama_cpp.llama_n_threads(llama.ctx),
                      "wall_ms": round(wall, 1), "out": out.text})
        return out

    backend.generate = generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--row", default="ras", help="the ras entry's name")
    parser.add_argument("--questions", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        session = api.open_session(args.spec, cache=CallCache(Path(scratch)))
        step = next(s for s in session.plan.steps if s.kind == "retrieve"
                    and s.config["strategy"]["name"] == args.row)
        inputs = {role: session.artefact(dep) for role, dep in step.inputs.items()}
        loop = load_strategy(step.config, inputs, session.models)
        questions = read_questions(inputs["corpus"])
        if "held_out" in step.config:
            kept = held_out(questions["question_id"], step.config["held_out"])
            questions = questions.filter(questions["question_id"].is_in(kept))
        texts = questions["question"].to_list()[: args.questions]
        vectors = session.models.embedder_of(step.config["embedder"]).encode(texts)
        calls: list[dict] = []
        profiled(loop.llm.backend, calls)
        loop.llm.backend._model()  # loaded before the clock starts
        per_question: list[dict] = []
        for text, vector in zip(texts, vectors):
            first = len(calls)
            started = time.perf_counter()
            evidence = loop.retrieve(text, vector)
            wall = (time.perf_counter() - started) * 1000
            mine = calls[first:]
            for call in mine:
                print(json.dumps(call))
            figures = {
                "question": text[:60], "iterations": evidence.trace["iterations"],
                "stop": evidence.trace["stop"], "calls": len(mine), "wall_ms": round(wall),
                "p_eval_ms": round(sum(c["p_eval_ms"] for c in mine)),
                "decode_ms": round(sum(c["decode_ms"] for c in mine)),
                "call_rest_ms": round(sum(c["wall_ms"] - c["p_eval_ms"] - c["decode_ms"]
                                          for c in mine)),
                "loop_without_llm_ms": round(wall - evidence.llm_ms),
                "prompt_tokens": sum(c["prompt_tokens"] for c in mine),
                "p_eval_tokens": sum(c["p_eval_tokens"] for c in mine),
                "decode_tokens": sum(c["decode_tokens"] for c in mine)}
            print("question", json.dumps(figures))
            per_question.append(figures)
        print("total", json.dumps({key: sum(f[key] for f in per_question) for key in (
            "calls", "wall_ms", "p_eval_ms", "decode_ms", "call_rest_ms", "loop_without_llm_ms",
            "prompt_tokens", "p_eval_tokens", "decode_tokens")}))


if __name__ == "__main__":
    main()
