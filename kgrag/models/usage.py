"""Token and call accounting shared by the model layers, and the one path by which a
model's calls go through the cache and are counted (``CountedCache``).

Counters only ever grow; the runner snapshots them around each step and
records the difference, so no step has to count anything itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgrag.models.cache import CallCache


@dataclass
class Usage:
    """Model work done: ``calls`` really ran the model, ``cache_hits`` were replayed.

    Token counts cover both, because a replayed call still stands for the tokens
    the pipeline would have spent (hits replay the counts recorded at the miss).
    """

    calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def snapshot(self) -> Usage:
        return Usage(**asdict(self))

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def since(self, before: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


Tokens = Callable[[dict[str, Any]], tuple[int, int]]  # a payload's tokens in and out


def no_tokens(payload: dict[str, Any]) -> tuple[int, int]:
    return 0, 0


class CountedCache:
    """One model's calls through the call cache, counted: the one cache-then-count path
    of every model (generations, log-probabilities, the Graph-LLM, embeddings). A key the
    cache answers is a hit, one computed is a call; ``tokens(payload)`` gives the tokens
    in and out a payload stands for, counted for hits and calls alike. The counters are
    shared by the threads of an executor, so they are changed under a lock."""

    def __init__(self, cache: CallCache, model: str) -> None:
        self.cache, self.model = cache, model
        self.usage = Usage()
        self._counting = threading.Lock()

    def one(self, key: str, compute: Callable[[], dict[str, Any]], tokens: Tokens = no_tokens
            ) -> tuple[dict[str, Any], bool]:
        """The payload of ``key`` and whether it was computed (``compute()``)."""
        (payload,), (computed,) = self.many([key], lambda todo: [compute()], tokens)
        return payload, computed

    def many(self, keys: list[str], compute: Callable[[list[int]], list[dict[str, Any]]],
             tokens: Tokens = no_tokens) -> tuple[list[dict[str, Any]], list[bool]]:
        """The payloads of distinct ``keys``; the missing ones computed together by
        ``compute(positions)`` (``CallCache.get_or_compute_many``)."""
        payloads, computed = self.cache.get_or_compute_many(keys, self.model, compute)
        spent = [tokens(p) for p in payloads]
        with self._counting:
            self.usage.calls += sum(computed)
            self.usage.cache_hits += len(keys) - sum(computed)
            self.usage.tokens_in += sum(t[0] for t in spent)
            self.usage.tokens_out += sum(t[1] for t in spent)
        return payloads, computed

    def repeated(self, n: int) -> None:
        """``n`` more requests answered by a payload in hand (counted as hits)."""
        with self._counting:
            self.usage.cache_hits += n
