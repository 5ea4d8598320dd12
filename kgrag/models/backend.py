"""What the call cache needs of an LLM backend: the one interface that the in-process
llama.cpp model (``kgrag.models.llm.LlamaCppBackend``) and a model server
(``kgrag.models.served.ServerBackend``) both implement, so ``CachedLLM`` and the
executors never ask which one computes a cache miss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kgrag.models.llm import Completion


class LLMBackend(Protocol):
    def generate(self, request: dict[str, Any]) -> Completion:
        """One completion for a cache ``request`` dict: a chat completion when it carries
        ``messages``, a plain text completion when it carries ``prompt``; constrained by
        its ``json_schema`` or ``grammar`` when one is set."""

    def logprobs(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Per request, ``{"mean", "tokens", "target_tokens"}``: the mean log-probability
        per token of ``request["target"]`` continuing ``request["context"]``; requests
        that open alike may share their evaluation."""
