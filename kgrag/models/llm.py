"""The LLM interface: chat completions from a local GGUF model through llama.cpp.

Layers, outermost first (the graphrag "middleware" idea, so steps never repeat
them): ``CachedLLM`` (disk cache, token accounting, retries with validation)
wraps ``LlamaCppBackend`` (the model in-process, loaded only on a cache miss).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kgrag.errors import KgragError
from kgrag.models.cache import CallCache, request_key
from kgrag.models.usage import Usage

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
    the machine's cores, which on 2 cores leaves one idle (measured: 23% slower
    extraction)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LlamaCppBackend:
    """llama-cpp-python in-process; the model loads on first use."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._llama: Any = None

    def _model(self) -> Any:
        if self._llama is None:
            from llama_cpp import Llama

            s = self.settings
            try:
                self._llama = Llama(
                    model_path=str(s.path), n_ctx=s.n_ctx, n_threads=s.n_threads or usable_cores(),
                    n_gpu_layers=s.n_gpu_layers, seed=s.seed, verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise KgragError(f"llama.cpp could not load {s.path}: {exc}") from exc
            if "tokenizer.chat_template" not in self._llama.metadata:
                arch = self._llama.metadata.get("general.architecture", "")
                self._llama.chat_format = FALLBACK_CHAT_FORMATS.get(arch, "chatml")
        return self._llama

    def generate(self, request: dict[str, Any]) -> Completion:
        """Run one completion described by a cache ``request`` dict: a chat completion
        when it carries ``messages``, a plain text completion when it carries ``prompt``."""
        from llama_cpp import LlamaGrammar

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


class InvalidOutput(Exception):
    """Raised when a structured output still fails validation after every retry."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class CachedLLM:
    """The LLM every step uses: cache first, then the backend; counts all usage.

    Structured calls (``chat_json``) validate each output. Every attempt is
    cached together with its verdict, so a warm rerun replays the same retries
    without calling the model, yet an invalid output is never returned as valid.
    """

    def __init__(self, settings: LLMSettings, cache: CallCache, backend: Any = None) -> None:
        self.settings = settings
        self.cache = cache
        self.backend = backend if backend is not None else LlamaCppBackend(settings)
        self.usage = Usage()

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
        key = request_key("llm", request)
        hit = self.cache.get(key, self.settings.name)
        if hit is not None:
            completion = Completion(hit["text"], hit["tokens_in"], hit["tokens_out"], cached=True)
            self.usage.cache_hits += 1
        else:
            completion = self.backend.generate(request)
            self.usage.calls += 1
        self.usage.tokens_in += completion.tokens_in
        self.usage.tokens_out += completion.tokens_out
        value, error = completion.text, None
        if validate is not None:
            try:
                value = validate(completion.text)
            except (ValueError, KeyError, TypeError) as exc:
                value, error = None, f"{type(exc).__name__}: {exc}"
        if hit is None:
            self.cache.set(key, {"text": completion.text, "tokens_in": completion.tokens_in,
                                 "tokens_out": completion.tokens_out, "valid": error is None,
                                 "error": error})
        return completion, value, error

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
