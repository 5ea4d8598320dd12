"""Teacher-forced log-probabilities of many (context, target) pairs from one llama.cpp
context, each shared prefix evaluated once (ARK's alignment scores).

Why a scorer of its own: ARK scores every candidate unit of every question twice, and
both prompts open with the unit, which is most of their tokens. Scoring the pairs
one by one with every position's logits kept (llama-cpp-python's ``logits_all``) pays for
a vocabulary-wide output row at each prompt token and re-evaluates the unit for each
prompt. Here the pairs are taken in token order, so consecutive ones share their longest
prefix; the context keeps the previous pair's evaluation up to the shared prefix, and
only the tokens after it are evaluated, in batches of ``BATCH`` tokens, with logits
asked for at the target positions alone.

A score is the mean over the target's tokens of log-softmax(logits)[token]. It does not
depend on which pairs were scored with it beyond float rounding (a prefix kept from an
earlier pair, or a batch split elsewhere): the scores agree with a pair scored alone to
far below the differences between units (``benchmarks/ark_scoring.py`` measures both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kgrag.errors import KgragError, Refused

# Tokens per llama_decode call: larger batches use the matrix kernels better; the
# output buffer holds logits only for the target positions asked for.
BATCH = 512


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def mean_logprob(logits: np.ndarray, target: Sequence[int]) -> float:
    """The mean log-softmax of ``target``'s tokens under ``logits`` (one row each)."""
    rows = np.asarray(logits, dtype=np.float64)
    peak = rows.max(axis=1, keepdims=True)
    log_norm = peak[:, 0] + np.log(np.exp(rows - peak).sum(axis=1))
    return float(np.mean(rows[np.arange(len(target)), target] - log_norm))


class PrefixScorer:
    """A llama.cpp context (``Llama`` without ``logits_all``) that scores pairs sharing
    prefixes; ``fit_threads(llama)`` is called before each batch of pairs."""

    def __init__(self, llama: Any, fit_threads=lambda llama: None) -> None:
        self.llama = llama
        self.fit_threads = fit_threads
        self._evaluated: list[int] = []  # the tokens the context holds, in order
        self.tokens_evaluated = 0  # what the prefix sharing left to evaluate (benchmarks)

    def tokens(self, request: dict[str, Any]) -> tuple[list[int], list[int]]:
        """The context's tokens (with BOS) and the target's."""
        context = self.llama.tokenize(request["context"].encode(), add_bos=True,
                                      special=False)
        target = self.llama.tokenize(request["target"].encode(), add_bos=False,
                                     special=False)
        if not target:
            raise KgragError("log-probability of an empty target")
        return context, target

    def score(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``{"mean", "tokens", "target_tokens"}`` of each request, in their order."""
        pairs = [self.tokens(r) for r in requests]
        too_long = max(len(c) + len(t) for c, t in pairs)
        if too_long > self.llama.n_ctx():
            raise Refused(f"{too_long} tokens to score exceed the scorer's context "
                             f"{self.llama.n_ctx()}; raise models.llm.n_ctx")
        self.fit_threads(self.llama)
        order = sorted(range(len(pairs)), key=lambda i: pairs[i][0] + pairs[i][1])
        out: list[dict[str, Any]] = [{}] * len(pairs)
        for i in order:
            context, target = pairs[i]
            logits = self._evaluate(context + target, len(context) - 1)
            out[i] = {"mean": mean_logprob(logits, target),
                      "tokens": len(context) + len(target), "target_tokens": len(target)}
        return out

    def _evaluate(self, tokens: list[int], first_logit: int) -> np.ndarray:
        """Logits of positions ``first_logit`` … ``len(tokens) - 2`` (those that predict
        the target), evaluating only what the context does not already hold."""
        import llama_cpp

        keep = min(common_prefix(self._evaluated, tokens), first_logit)
        ctx = self.llama.ctx
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, keep, -1)
        self._evaluated = self._evaluated[:keep]
        vocab = self.llama.n_vocab()
        rows = []
        batch = self.llama._batch.batch
        for start in range(keep, len(tokens) - 1, BATCH):
            end = min(len(tokens) - 1, start + BATCH)  # the last token predicts nothing
            batch.n_tokens = end - start
            for j, position in enumerate(range(start, end)):
                batch.token[j] = tokens[position]
                batch.pos[j] = position
                batch.seq_id[j][0] = 0
                batch.n_seq_id[j] = 1
                batch.logits[j] = position >= first_logit
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise KgragError("llama.cpp could not evaluate a prompt to score")
            self._evaluated += tokens[start:end]
            self.tokens_evaluated += end - start
            for j, position in enumerate(range(start, end)):
                if position >= first_logit:
                    row = llama_cpp.llama_get_logits_ith(ctx, j)
                    rows.append(np.ctypeslib.as_array(row, shape=(vocab,)).copy())
        return np.stack(rows)
