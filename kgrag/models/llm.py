"""The LLM every step uses: chat and text completions, structured outputs and
log-probabilities of a local model, each call cached on disk and counted.

Layers, outermost first (the graphrag "middleware" idea, so steps never repeat
them): ``CachedLLM`` (disk cache, token accounting, retries with validation) wraps a
backend (``kgrag.models.backend.LLMBackend``: llama.cpp in-process by default, a model
server, or Ray actors), which is asked only on a cache miss.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar, overload

from kgrag.models.backend import FIXED_SAMPLING, Completion, LLMBackend, LLMSettings
from kgrag.models.cache import CallCache, request_key
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.usage import CountedCache, Usage

T = TypeVar("T")
Message = dict[str, str]


class Score(NamedTuple):
    """A target's mean log-probability per token, its tokens, and the tokens of context
    and target together (what the call counts as tokens in)."""

    mean: float
    target_tokens: int
    tokens: int


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
        self.calls = CountedCache(cache, settings.name)

    @property
    def usage(self) -> Usage:
        return self.calls.usage

    def computing_with(self, backend: LLMBackend) -> CachedLLM:
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

        payload, computed = self.calls.one(request_key("llm", request), generate,
                                           lambda p: (p["tokens_in"], p["tokens_out"]))
        completion = Completion(payload["text"], payload["tokens_in"], payload["tokens_out"],
                                cached=not computed)
        value, error = _checked(completion.text, validate)
        return completion, value, error

    def logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The mean log-probability per token of each ``target`` continuing its
        ``context`` (ARK's alignment scores); see ``scores``."""
        return [score.mean for score in self.scores(pairs)]

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[Score]:
        """The log-probability of each ``target`` continuing its ``context``, each cached
        like every call (its tokens count as tokens in). The pairs the cache lacks go to
        the backend together, so the prompts that open alike (a unit's forward and
        backward prompts, one question's candidate answers) share their evaluation."""
        requests = [{"model_sha256": self.settings.sha256, "logprob": 1, "context": context,
                     "target": target} for context, target in pairs]
        asked = [request_key("llm", request) for request in requests]
        distinct = dict(zip(asked, requests))
        keys = list(distinct)
        payloads, _ = self.calls.many(
            keys, lambda todo: self.backend.logprobs([distinct[keys[i]] for i in todo]),
            lambda p: (p["tokens"], 0))
        score = {key: Score(p["mean"], p["target_tokens"], p["tokens"])
                 for key, p in zip(keys, payloads)}
        return [score[key] for key in asked]

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

    @overload
    def ask_json(self, prompt: str, schema: dict[str, Any], *, style: str, max_tokens: int,
                 validate: None = None) -> tuple[Any, int]: ...

    @overload
    def ask_json(self, prompt: str, schema: dict[str, Any], *, style: str, max_tokens: int,
                 validate: Callable[[Any], T]) -> tuple[T, int]: ...

    def ask_json(self, prompt: str, schema: dict[str, Any], *, style: str, max_tokens: int,
                 validate: Callable[[Any], T] | None = None) -> tuple[T, int]:
        """``ask`` for a JSON object constrained by ``schema``; see ``_json``. Without
        ``validate`` the value is the parsed JSON, of the shape ``schema`` constrains."""
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
