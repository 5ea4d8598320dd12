"""The reference log-probability scorer: the way ARK's scores were computed before
``kgrag.models.logprob`` (one request at a time, every position's logits kept, prompts
evaluated in 64-token blocks with the previous request's blocks reused). The fast path
is checked against it (tests/integration/test_integration_ark.py) and timed beside it
(benchmarks/ark_scoring.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.models.backend import LLMSettings
from kgrag.models.llamacpp import PROMPT_BLOCK, _aligned_llama, block_prefix
from kgrag.training.alignment import BACKWARD, FORWARD

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "musique_200.jsonl"
SMALLEST_CTX = 1024  # the old scorer's smallest context, doubled to fit a request


class ReferenceScorer:
    """``logprob(request)`` as the scorer computed it: an instance with ``logits_all``,
    sized to the smallest power of two (at least 1,024 tokens) that holds the request."""

    def __init__(self, settings: LLMSettings, threads: int) -> None:
        self.settings, self.threads = settings, threads
        self._llama: Any = None

    def _model(self, needed: int) -> Any:
        size = max(SMALLEST_CTX, 1 << (needed - 1).bit_length())
        if self._llama is None or self._llama.n_ctx() < size:
            self._llama = None
            self._llama = _aligned_llama()(
                model_path=str(self.settings.path), n_ctx=min(size, self.settings.n_ctx),
                n_batch=PROMPT_BLOCK, n_threads=self.threads, logits_all=True, verbose=False)
        return self._llama

    def logprob(self, request: dict[str, Any]) -> dict[str, Any]:
        vocab = self._model(0)
        context = vocab.tokenize(request["context"].encode(), add_bos=True, special=False)
        target = vocab.tokenize(request["target"].encode(), add_bos=False, special=False)
        tokens = context + target
        scorer = self._model(len(tokens))
        scorer.n_tokens = block_prefix(scorer.input_ids[:scorer.n_tokens], tokens, PROMPT_BLOCK)
        scorer.eval(tokens[scorer.n_tokens:])
        logits = np.asarray(scorer.scores[len(context) - 1:len(tokens) - 1], dtype=np.float64)
        peak = logits.max(axis=1, keepdims=True)
        log_norm = peak[:, 0] + np.log(np.exp(logits - peak).sum(axis=1))
        picked = logits[np.arange(len(target)), target]
        return {"mean": float(np.mean(picked - log_norm)), "tokens": len(tokens),
                "target_tokens": len(target)}


def fixed_pairs(questions: int, units: int, data: Path = DATA) -> list[list[dict]]:
    """Per question, its pairs' requests: forward then backward for each unit."""
    out = []
    for line in data.read_text().splitlines()[:questions]:
        record = json.loads(line)
        paragraphs = sorted(record["paragraphs"], key=lambda p: not p["is_supporting"])
        requests = []
        for p in paragraphs[:units]:
            unit = f"# {p['title']}\n{p['paragraph_text']}"
            requests.append({"context": FORWARD.format(unit=unit, question=record["question"]),
                             "target": " " + record["answer"]})
            requests.append({"context": BACKWARD.format(unit=unit, answer=record["answer"]),
                             "target": " " + record["question"]})
        out.append(requests)
    return out
