"""What the call cache needs of a model backend: the one interface that the in-process
llama.cpp model (``kgrag.models.llamacpp.LlamaCppBackend``), a model server
(``kgrag.models.served.ServerBackend``), a Ray actor pool
(``kgrag.models.ray_actors.RemoteBackend``) and the stand-ins of tests all implement, so
``CachedLLM`` and the executors never ask which one computes a cache miss; likewise for
embedders. Also what every LLM backend shares: its settings, what it returns and the
sampling it pins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

# Sampling knobs llama.cpp applies besides the ones the spec exposes. They are
# pinned and part of every cache key, so a library default changing under us
# cannot silently change cached answers.
FIXED_SAMPLING = {"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0}


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


@runtime_checkable
class LLMBackend(Protocol):
    def generate(self, request: dict[str, Any]) -> Completion:
        """One completion for a cache ``request`` dict: a chat completion when it carries
        ``messages``, a plain text completion when it carries ``prompt``; constrained by
        its ``json_schema`` or ``grammar`` when one is set."""
        ...

    def logprobs(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Per request, ``{"mean", "tokens", "target_tokens"}``: the mean log-probability
        per token of ``request["target"]`` continuing ``request["context"]``; requests
        that open alike may share their evaluation."""
        ...


@runtime_checkable
class EmbedBackend(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors of ``texts``, one row each, in order."""
        ...
