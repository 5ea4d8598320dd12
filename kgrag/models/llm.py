"""The LLM interface: chat completions from a local GGUF model through llama.cpp.

Layers, outermost first (the graphrag "middleware" idea, so steps never repeat
them): ``CachedLLM`` (disk cache, token accounting, retries with validation)
wraps ``LlamaCppBackend`` (the model in-process, loaded only on a cache miss).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psutil

from kgrag.errors import KgragError
from kgrag.models.cache import CallCache, request_key
from kgrag.models.greedy_grammar import GreedyGrammar
from kgrag.models.logprob import BATCH as SCORER_BATCH
from kgrag.models.logprob import PrefixScorer
from kgrag.models.usage import Usage

if TYPE_CHECKING:
    from kgrag.models.backend import LLMBackend

log = logging.getLogger(__name__)

T = TypeVar("T")
Message = dict[str, str]

# Sampling knobs llama.cpp applies besides the ones the spec exposes. They are
# pinned and part of every cache key, so a library default changing under us
# cannot silently change cached answers.
FIXED_SAMPLING = {"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0}

# llama-cpp-python's chat formats for GGUFs that carry no chat template of their
# own (the bundled Gemma 3 270M is one); anything else unknown gets ChatML.
FALLBACK_CHAT_FORMATS = {"gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma",
                         "llama": "llama-2", "qwen2": "chatml"}


@dataclass(frozen=True)
class LLMSettings:
    """The spec's ``models.llm`` section, resolved."""

    name: str
    path: Path
    sha256: str
    n_ctx: int = 8192
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    n_threads: int | None = None
    n_gpu_layers: int = 0
    max_retries: int = 2


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    cached: bool


def usable_cores() -> int:
    """The CPU cores this process may run on. llama-cpp-python's own default is half
    the machine's cores, which on 2 cores leaves one idle (slower extraction)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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
# alone: llama-cpp-python reuses any common prefix, and the differently split batch that
# follows changed greedy answers (2 of 30 quickstart prompts).
PROMPT_BLOCK = 64
# Cores that others keep this busy still count as free: background noise must not halve
# llama.cpp's threads, while a test suite or a second run (a whole core) must.
FREE_CORE_SLACK = 0.25


class CpuShare:
    """How many threads llama.cpp should run for the next call: the cores that other
    processes left free during the previous one.

    llama.cpp's threads spin-wait for each other at every step of a decode. When
    another process holds one of the cores, a waiting thread burns its time slice while
    the thread it waits for is descheduled: a run beside the test suite was about 15x
    slower, two runs together each at a quarter speed. With one thread per busy core
    fewer, a decode never waits on a descheduled thread. Measured from the system-wide
    CPU time less this process's own, over the previous call (or a short first look).
    """

    def __init__(self, cores: int, first_look_s: float = 0.2) -> None:
        self.cores = cores
        self.first_look_s = first_look_s
        self._proc = psutil.Process()
        self._mark: tuple[float, float, float] | None = None

    def _sample(self) -> tuple[float, float, float]:
        system = psutil.cpu_times()
        busy = sum(system) - system.idle - getattr(system, "iowait", 0.0)
        own = self._proc.cpu_times()
        return time.monotonic(), busy, own.user + own.system

    def others_busy(self) -> float:
        """Cores' worth of CPU time other processes used since the last look."""
        if self._mark is None:
            self._mark = self._sample()
            time.sleep(self.first_look_s)
        now = self._sample()
        (t0, busy0, own0), self._mark = self._mark, now
        wall = max(now[0] - t0, 1e-6)
        return max(0.0, (now[1] - busy0) - (now[2] - own0)) / wall

    def threads(self) -> int:
        free = self.cores - self.others_busy()
        return max(1, min(self.cores, int(free + FREE_CORE_SLACK)))


def block_prefix(evaluated: Sequence[int], tokens: Sequence[int], block: int) -> int:
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

    class AlignedLlama(Llama):
        greedy_first = True
        _greedy: GreedyGrammar | None = None

        def generate(self, tokens: Sequence[int], **kwargs: Any) -> Any:
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

        def sample(self, **kwargs: Any) -> int:
            if self._greedy is None:
                return super().sample(**kwargs)
            return self._greedy.sample(kwargs.get("idx"))

    return AlignedLlama


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
            raise KgragError(f"{self.settings.path.name}: {exc}; raise models.llm.n_ctx or "
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


class InvalidOutput(Exception):
    """Raised when a structured output still fails validation after every retry."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _checked(text: str, validate: Callable[[str], Any] | None) -> tuple[Any, str | None]:
    """(value, None) when ``text`` passes ``validate`` (or there is none), else (None, why)."""
    if validate is None:
        return text, None
    try:
        return validate(text), None
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


class CachedLLM:
    """The LLM every step uses: cache first, then the backend; counts all usage.

    Structured calls (``chat_json``) validate each output. Every attempt is
    cached together with its verdict, so a warm rerun replays the same retries
    without calling the model, yet an invalid output is never returned as valid.
    """

    def __init__(self, settings: LLMSettings, cache: CallCache,
                 backend: LLMBackend | None = None) -> None:
        self.settings = settings
        self.cache = cache
        self.backend: LLMBackend = backend if backend is not None else LlamaCppBackend(settings)
        self.usage = Usage()
        self._counting = threading.Lock()  # an executor's threads share the counters

    def computing_with(self, backend: Any) -> CachedLLM:
        """This LLM with its cache misses computed by ``backend``: the same settings,
        cache and usage counters (how an executor sends calls elsewhere)."""
        view = copy.copy(self)
        view.backend = backend
        return view

    def _request(self, body: dict[str, Any], max_tokens: int, attempt: int,
                 json_schema: dict | None, grammar: str | None, stop: list[str]) -> dict[str, Any]:
        s = self.settings
        # A retry must differ from the attempt it replaces: at temperature 0 a new
        # seed alone would change nothing, so retries sample mildly.
        temperature = s.temperature if attempt == 0 else max(s.temperature, 0.3)
        return {
            "model_sha256": s.sha256, **body, "max_tokens": max_tokens,
            "temperature": temperature, "top_p": s.top_p, "seed": s.seed + attempt,
            "json_schema": json_schema, "grammar": grammar, "stop": stop, **FIXED_SAMPLING,
        }

    def _call(self, request: dict[str, Any], validate: Callable[[str], Any] | None
              ) -> tuple[Completion, Any, str | None]:
        def generate() -> dict[str, Any]:
            out = self.backend.generate(request)
            error = _checked(out.text, validate)[1]
            return {"text": out.text, "tokens_in": out.tokens_in, "tokens_out": out.tokens_out,
                    "valid": error is None, "error": error}

        payload, computed = self.cache.get_or_compute(request_key("llm", request),
                                                      self.settings.name, generate)
        completion = Completion(payload["text"], payload["tokens_in"], payload["tokens_out"],
                                cached=not computed)
        with self._counting:
            if computed:
                self.usage.calls += 1
            else:
                self.usage.cache_hits += 1
            self.usage.tokens_in += completion.tokens_in
            self.usage.tokens_out += completion.tokens_out
        value, error = _checked(completion.text, validate)
        return completion, value, error

    def logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The mean log-probability per token of each ``target`` continuing its
        ``context`` (ARK's alignment scores), each cached like every call (its tokens
        count as tokens in). The pairs the cache lacks go to the backend together, so
        the prompts that open alike (a unit's forward and backward prompts) share their
        evaluation."""
        asked = [request_key("llm", {"model_sha256": self.settings.sha256, "logprob": 1,
                                     "context": context, "target": target})
                 for context, target in pairs]
        requests = {key: {"model_sha256": self.settings.sha256, "logprob": 1,
                          "context": c, "target": t} for key, (c, t) in zip(asked, pairs)}
        keys = list(requests)  # distinct
        payloads, computed = self.cache.get_or_compute_many(
            keys, self.settings.name,
            lambda todo: self.backend.logprobs([requests[keys[i]] for i in todo]))
        with self._counting:
            self.usage.calls += sum(computed)
            self.usage.cache_hits += len(keys) - sum(computed)
            self.usage.tokens_in += sum(p["tokens"] for p in payloads)
        mean = {key: p["mean"] for key, p in zip(keys, payloads)}
        return [mean[key] for key in asked]

    def chat(self, messages: list[Message], *, max_tokens: int, stop: list[str] | None = None,
             grammar: str | None = None) -> Completion:
        """One chat completion through the model's chat template."""
        request = self._request({"messages": messages}, max_tokens, 0, None, grammar,
                                list(stop or []))
        return self._call(request, None)[0]

    def complete(self, prompt: str, *, max_tokens: int, stop: list[str] | None = None,
                 grammar: str | None = None) -> Completion:
        """One plain text completion, no chat template (what base models need)."""
        request = self._request({"prompt": prompt}, max_tokens, 0, None, grammar,
                                list(stop or []))
        return self._call(request, None)[0]

    def chat_json(self, messages: list[Message], schema: dict[str, Any], *, max_tokens: int,
                  validate: Callable[[Any], T] | None = None) -> tuple[T, int]:
        """A JSON object constrained by ``schema`` through the chat template; see ``_json``."""
        return self._json({"messages": messages}, schema, max_tokens, validate)

    def complete_json(self, prompt: str, schema: dict[str, Any], *, max_tokens: int,
                      validate: Callable[[Any], T] | None = None) -> tuple[T, int]:
        """A JSON object constrained by ``schema`` continuing a plain prompt; see ``_json``."""
        return self._json({"prompt": prompt}, schema, max_tokens, validate)

    def ask(self, prompt: str, *, style: str, max_tokens: int, stop: list[str] | None = None,
            grammar: str | None = None) -> Completion:
        """One self-contained instruction: a single user turn through the chat template
        (``style`` "chat", instruction-tuned models) or the plain text ("completion")."""
        if style == "chat":
            return self.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                             stop=stop, grammar=grammar)
        return self.complete(prompt, max_tokens=max_tokens, stop=stop, grammar=grammar)

    def ask_json(self, prompt: str, schema: dict[str, Any], *, style: str, max_tokens: int,
                 validate: Callable[[Any], T] | None = None) -> tuple[T, int]:
        """``ask`` for a JSON object constrained by ``schema``; see ``_json``."""
        if style == "chat":
            return self.chat_json([{"role": "user", "content": prompt}], schema,
                                  max_tokens=max_tokens, validate=validate)
        return self.complete_json(prompt, schema, max_tokens=max_tokens, validate=validate)

    def _json(self, body: dict[str, Any], schema: dict[str, Any], max_tokens: int,
              validate: Callable[[Any], T] | None) -> tuple[T, int]:
        """Parse and validate constrained output, retrying up to ``max_retries`` times.

        Returns the validated value and the number of attempts it took; raises
        ``InvalidOutput`` when every attempt (1 + max_retries) failed.
        """

        def check(text: str) -> Any:
            obj = json.loads(text)
            return validate(obj) if validate is not None else obj

        errors = []
        for attempt in range(1 + self.settings.max_retries):
            request = self._request(body, max_tokens, attempt, schema, None, [])
            _, value, error = self._call(request, check)
            if error is None:
                return value, attempt + 1
            errors.append(error)
        raise InvalidOutput(errors)
