"""A trained Graph-LLM (RAS's planner-answerer) behind the shared call cache.

Every generation is cached like every model call: the key holds the model's identity
(the fingerprint of the training step that wrote it), the prompt, the subgraphs and the
token cap, so a warm rerun answers from the cache and never loads torch or the model.
The model loads on the first miss.

The folder a ``ras`` training entry hands a strategy holds ``identity.json`` (that
fingerprint, the base LLM's sha256 and the embedder's identity) and ``model/`` (the
Graph-LLM, ``kgrag.training.graph_llm``, which loads it behind this cache). A model
trained on another base LLM than the spec's is refused before anything loads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgrag.errors import KgragError
from kgrag.models.cache import CallCache, request_key
from kgrag.models.usage import CountedCache, Usage

IDENTITY = "identity.json"
MODEL = "model"
NAME = "graph-llm"


class CachedGraphLLM:
    """``generate(prompt, subgraphs, max_new_tokens)`` through the cache; counts usage."""

    def __init__(self, identity: str, cache: CallCache, load: Callable[[], Any]) -> None:
        self.identity, self.cache, self._load = identity, cache, load
        self._model: Any = None
        self.calls = CountedCache(cache, NAME)
        self._loading = threading.Lock()

    @property
    def usage(self) -> Usage:
        return self.calls.usage

    def generate(self, prompt: str, subgraphs: list[list[tuple[str, str, str]]],
                 max_new_tokens: int) -> str:
        request = {"graph_llm": self.identity, "prompt": prompt,
                   "subgraphs": [[list(t) for t in g] for g in subgraphs],
                   "max_new_tokens": max_new_tokens}

        def compute() -> dict[str, Any]:
            with self._loading:
                if self._model is None:
                    self._model = self._load()
            return {"text": self._model.generate(prompt, subgraphs, max_new_tokens)}

        payload, _ = self.calls.one(request_key(NAME, request), compute)
        return payload["text"]


def read_identity(folder: Path) -> dict[str, str]:
    try:
        return json.loads((folder / IDENTITY).read_text())
    except (OSError, ValueError) as exc:
        raise KgragError(f"{folder} holds no trained RAS Graph-LLM ({IDENTITY}: {exc})") from None
