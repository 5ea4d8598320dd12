"""Grammar-constrained greedy decoding that checks the greedy token first.

llama-cpp-python's sampler chain applies the grammar to every token of the vocabulary
(49k for SmolLM2, 262k for Gemma) at every step, then takes the best allowed one.
At temperature 0 the answer is the same if the model's own best token is checked
first and the whole vocabulary is masked only when the grammar rejects it: the best
allowed token is then the best token. Penalties are pinned neutral
(``FIXED_SAMPLING``), so the chain's other samplers change nothing at temperature 0,
and ties go to the lower token id in both ways. Sampling at a temperature (retries)
keeps the chain.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np


class GreedyGrammar:
    """The grammar state of one generation, advanced one greedy token at a time."""

    def __init__(self, llama: Any, grammar: Any) -> None:
        import llama_cpp

        self._lib, self._llama = llama_cpp, llama
        self._n_vocab = llama.n_vocab()
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode(), grammar._root.encode())
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = (llama_cpp.llama_token_data * self._n_vocab)()
        self._all_view = np.ctypeslib.as_array(self._all)
        self._all_view["id"] = np.arange(self._n_vocab, dtype=np.int32)
        self.greedy_allowed = self.masked = 0

    def sample(self, idx: int | None) -> int:
        """The best token the grammar allows at ``idx`` (as ``Llama.sample`` counts it)."""
        lib = self._lib
        offset = idx - self._llama.n_tokens if idx is not None else -1
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(self._llama.ctx, offset),
                                       shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        self._one[0].id = lib.llama_token(token)
        self._one[0].logit, self._one[0].p = float(logits[token]), 0.0
        self._apply(self._one, 1)
        if math.isinf(self._one[0].logit):
            self.masked += 1
            self._all_view["logit"] = logits
            self._apply(self._all, self._n_vocab)
            token = int(np.argmax(self._all_view["logit"]))
        else:
            self.greedy_allowed += 1
        lib.llama_sampler_accept(self._sampler, token)
        return token

    def _apply(self, data: Any, size: int) -> None:
        """The grammar on the candidates ``data``, in place: rejected ones get -inf."""
        candidates = self._lib.llama_token_data_array(data, size, -1, False)
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(candidates))

    def close(self) -> None:
        self._lib.llama_sampler_free(self._sampler)
