"""llama.cpp in-process: the backend that computes an LLM's cache misses on this machine.

``LlamaCppBackend`` loads the GGUF on its first call, runs as many threads as other
processes leave cores free (``kgrag.host.CpuShare``), evaluates prompts in blocks at
fixed positions so that an output depends on its request alone (``PROMPT_BLOCK``),
checks the greedy token first under a grammar (``GreedyGrammar``) and scores
log-probabilities in a second context that shares prefixes (``PrefixScorer``).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kgrag.errors import KgragError, Refused
from kgrag.host import CpuShare, usable_cores
from kgrag.models.backend import FIXED_SAMPLING, Completion, LLMSettings
from kgrag.models.greedy_grammar import GreedyGrammar
from kgrag.models.logprob import BATCH as SCORER_BATCH
from kgrag.models.logprob import PrefixScorer

log = logging.getLogger(__name__)

# llama-cpp-python's chat formats for GGUFs that carry no chat template of their
# own (the bundled Gemma 3 270M is one); anything else unknown gets ChatML.
FALLBACK_CHAT_FORMATS = {"gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma",
                         "llama": "llama-2", "qwen2": "chatml"}


def thread_count(asked: int | None) -> int:
    """The threads llama.cpp runs for ``models.llm.n_threads``: every usable core when it
    is null, and never more than those cores. llama.cpp's threads spin-wait for each
    other at every step of a decode (``CpuShare``), so a thread without a core of its
    own stalls the others: a count far past the cores looks like a hang."""
    cores = usable_cores()
    if asked is None:
        return cores
    if asked > cores:
        log.warning("models.llm.n_threads is %d but this process may run on %d cores; "
                    "llama.cpp runs %d threads", asked, cores, cores)
        return cores
    return asked


# Prompts are evaluated in blocks of this many tokens at fixed positions (0, 64, 128…),
# and the prefix shared with the previous prompt is reused only up to a block boundary.
# A prompt then goes through the same batches whether it is the first call of a process
# or follows a prompt sharing its few-shot prefix, so its output depends on the request
# alone: llama-cpp-python reuses any common prefix, and a differently split batch after
# it changed greedy answers.
PROMPT_BLOCK = 64


def block_prefix(evaluated: Iterable[int], tokens: Sequence[int], block: int) -> int:
    """How many of ``tokens`` may keep the evaluation of the previous call's
    ``evaluated`` tokens: their common prefix (the last token always evaluated again, for
    its logits), cut to a multiple of ``block`` so that every call goes through the same
    batches and its output depends on its request alone."""
    common = 0
    for a, b in zip(evaluated, tokens[:-1]):
        if a != b:
            break
        common += 1
    return common - common % block


@functools.cache
def _aligned_llama() -> type:
    """llama-cpp-python's ``Llama`` with prefix reuse cut to a ``PROMPT_BLOCK`` boundary,
    and greedy grammar-constrained decoding that checks the greedy token first
    (``GreedyGrammar``) unless ``greedy_first`` is off."""
    from llama_cpp import Llama

    _route_logs()

    class AlignedLlama(Llama):
        greedy_first = True
        _greedy: GreedyGrammar | None = None

        # llama-cpp-python passes its sampling settings by keyword; these two overrides read
        # the few they need from ``kwargs`` instead of restating the base signatures
        def generate(  # type: ignore[override]  # keywords only, as the base calls it
                self, tokens: Sequence[int], **kwargs: Any) -> Any:
            tokens = list(tokens)
            # the base class reuses at most what n_tokens keeps: a block-aligned prefix
            self.n_tokens = block_prefix(self._input_ids, tokens, self.n_batch)
            grammar = kwargs.get("grammar")
            if not (self.greedy_first and grammar is not None and kwargs.get("temp") == 0):
                yield from super().generate(tokens, **kwargs)
                return
            self._greedy = GreedyGrammar(self, grammar)
            try:
                yield from super().generate(tokens, **kwargs)
            finally:
                self._greedy.close()
                self._greedy = None

        def sample(self, **kwargs: Any) -> int:  # type: ignore[override]  # as generate
            if self._greedy is None:
                return super().sample(**kwargs)
            return self._greedy.sample(kwargs.get("idx"))

    return AlignedLlama


# The levels of the messages llama.cpp hands to its log callback, in the ggml this
# llama-cpp-python is built on (its own callback still reads the older enum, so
# llama.cpp's warnings passed for errors and reached stderr whatever ``verbose`` said).
GGML_WARN, GGML_ERROR, GGML_CONT = 3, 4, 5


@functools.cache
def _route_logs() -> Any:
    """llama.cpp's warnings and errors into this module's log: errors as errors, warnings
    at DEBUG (what llama.cpp warns of is its own set-up, such as a cache's layout, which
    asks nothing of the user), so ``kgrag query`` prints none of them unless
    ``--verbose``.
    Returns the callback, which the cache keeps alive for as long as ctypes may call it."""
    import ctypes

    import llama_cpp

    last = [GGML_WARN]

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        level = last[0] if level == GGML_CONT else level
        last[0] = level
        message = text.decode("utf-8", "replace").rstrip()
        if message and level >= GGML_WARN:  # its info and debug lines: hundreds a load
            log.log(logging.ERROR if level >= GGML_ERROR else logging.DEBUG,
                    "llama.cpp: %s", message)

    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))
    return forward


class LlamaCppBackend:
    """llama-cpp-python in-process; the model loads on first use. ``greedy_first=False``
    masks the whole vocabulary at every grammar-constrained step, as llama-cpp-python
    does (the same outputs, slower; benchmarks compare the two)."""

    def __init__(self, settings: LLMSettings, greedy_first: bool = True) -> None:
        self.settings = settings
        self.greedy_first = greedy_first
        self._llama: Any = None
        self._scoring: PrefixScorer | None = None  # its own context, for ``logprobs``
        self._threads = thread_count(settings.n_threads)
        self._share = None if settings.n_threads else CpuShare(self._threads)

    def __reduce__(self) -> tuple[type, tuple[LLMSettings, bool]]:
        """Pickled as its recipe, never its loaded model: a Ray worker that receives it
        loads the model itself (``kgrag.models.executor``)."""
        return LlamaCppBackend, (self.settings, self.greedy_first)

    def _model(self) -> Any:
        if self._llama is None:
            s = self.settings
            try:
                self._llama = _aligned_llama()(
                    model_path=str(s.path), n_ctx=s.n_ctx, n_batch=PROMPT_BLOCK,
                    n_threads=self._threads, n_gpu_layers=s.n_gpu_layers,
                    seed=s.seed, verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise KgragError(f"llama.cpp could not load {s.path}: {exc}") from exc
            if "tokenizer.chat_template" not in self._llama.metadata:
                arch = self._llama.metadata.get("general.architecture", "")
                self._llama.chat_format = FALLBACK_CHAT_FORMATS.get(arch, "chatml")
        return self._llama

    def _fit_threads(self, llama: Any) -> None:
        """Run ``llama``'s next call on the cores others leave free (unless the spec fixed
        a count)."""
        if self._share is not None:
            import llama_cpp

            threads = self._share.threads()
            llama_cpp.llama_set_n_threads(llama.ctx, threads, threads)

    def generate(self, request: dict[str, Any]) -> Completion:
        """Run one completion described by a cache ``request`` dict: a chat completion
        when it carries ``messages``, a plain text completion when it carries ``prompt``."""
        from llama_cpp import LlamaGrammar

        self._fit_threads(self._model())
        self._model().greedy_first = self.greedy_first
        grammar = None
        if request.get("json_schema") is not None:
            grammar = LlamaGrammar.from_json_schema(json.dumps(request["json_schema"]), verbose=False)
        elif request.get("grammar") is not None:
            grammar = LlamaGrammar.from_string(request["grammar"], verbose=False)
        sampling = {"temperature": request["temperature"], "top_p": request["top_p"],
                    "max_tokens": request["max_tokens"], "stop": request["stop"] or None,
                    "seed": request["seed"], "grammar": grammar, **FIXED_SAMPLING}
        try:
            if "messages" in request:
                out = self._model().create_chat_completion(messages=request["messages"],
                                                           **sampling)
                text = out["choices"][0]["message"]["content"] or ""
            else:
                out = self._model().create_completion(prompt=request["prompt"], **sampling)
                text = out["choices"][0]["text"]
        except ValueError as exc:  # llama.cpp: prompt longer than the context window
            raise Refused(f"{self.settings.path.name}: {exc}; raise models.llm.n_ctx or "
                             "lower the context budget") from exc
        usage = out["usage"]
        return Completion(text=text, tokens_in=int(usage["prompt_tokens"]),
                          tokens_out=int(usage["completion_tokens"]), cached=False)

    def logprobs(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The mean log-probability of each ``request["target"]`` after its
        ``request["context"]`` (teacher forcing, log-softmax at each target position),
        from a second instance of the model that evaluates each shared prefix once
        (``PrefixScorer``)."""
        if self._scoring is None:
            s = self.settings
            try:
                llama = _aligned_llama()(
                    model_path=str(s.path), n_ctx=s.n_ctx, n_batch=SCORER_BATCH,
                    n_threads=self._threads, n_gpu_layers=s.n_gpu_layers, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise KgragError(f"llama.cpp could not load {s.path}: {exc}") from exc
            self._scoring = PrefixScorer(llama, self._fit_threads)
        return self._scoring.score(requests)
