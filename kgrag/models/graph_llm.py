"""A trained Graph-LLM (RAS's planner-answerer) behind the shared call cache.

Every generation is cached like every model call: the key holds the model's identity
(the fingerprint of the training step that wrote it), the prompt, the subgraphs and the
token cap, so a warm rerun answers from the cache and never loads torch or the model.
The model loads on the first miss.

The folder a ``ras`` training entry hands a strategy holds ``identity.json`` (that
fingerprint, the base LLM's sha256 and the embedder's identity) and ``model/`` (the
Graph-LLM, ``kgrag.training.graph_llm``). A model trained on another base LLM than the
spec's is refused before anything loads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgrag.errors import KgragError
from kgrag.models.cache import CallCache, request_key
from kgrag.models.served import model_file
from kgrag.models.usage import Usage

IDENTITY = "identity.json"
MODEL = "model"
NAME = "graph-llm"


class CachedGraphLLM:
    """``generate(prompt, subgraphs, max_new_tokens)`` through the cache; counts usage."""

    def __init__(self, identity: str, cache: CallCache, load: Callable[[], Any]) -> None:
        self.identity, self.cache, self._load = identity, cache, load
        self._model: Any = None
        self.usage = Usage()
        self._lock = threading.Lock()

    def generate(self, prompt: str, subgraphs: list[list[tuple[str, str, str]]],
                 max_new_tokens: int) -> str:
        request = {"graph_llm": self.identity, "prompt": prompt,
                   "subgraphs": [[list(t) for t in g] for g in subgraphs],
                   "max_new_tokens": max_new_tokens}

        def compute() -> dict[str, Any]:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
            return {"text": self._model.generate(prompt, subgraphs, max_new_tokens)}

        payload, computed = self.cache.get_or_compute(request_key(NAME, request), NAME, compute)
        if computed:
            self.usage.calls += 1
        else:
            self.usage.cache_hits += 1
        return payload["text"]


def read_identity(folder: Path) -> dict[str, str]:
    try:
        return json.loads((folder / IDENTITY).read_text())
    except (OSError, ValueError) as exc:
        raise KgragError(f"{folder} holds no trained RAS Graph-LLM ({IDENTITY}: {exc})") from None


def load_cached_graph_llm(folder: Path, models: Any) -> CachedGraphLLM:
    """The Graph-LLM a training step wrote into ``folder``, for the spec's ``models``:
    its base must be the spec's LLM, and it reads the embedder it was trained with."""
    identity = read_identity(folder)
    base = models.model("answerer")
    if identity["base_sha256"] != base.sha256:
        raise KgragError(f"the Graph-LLM in {folder} was trained on another base LLM (sha256 "
                         f"{identity['base_sha256'][:12]}…) than this spec's {base.name} "
                         f"({base.sha256[:12]}…); train it on models.llm, or name that LLM")
    embedder = models.embedder_of(identity["embedder"])

    def load() -> Any:
        from kgrag.training.graph_llm import GraphLLM

        return GraphLLM.load(folder / MODEL, model_file(base, "RAS's Graph-LLM"),
                             embedder.encode)

    return CachedGraphLLM(identity["fingerprint"], models.cache, load)
