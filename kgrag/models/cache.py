"""One disk cache for every model call.

Why a cache layer at all: local LLM calls are the slow part of every
pipeline, and experiments repeat the same calls constantly (a query parameter
changes, a second spec runs over the same corpus). The cache makes every call
reproducible and free the second time.

What goes into a key: everything that changes the output (model file sha256,
messages, sampling parameters, seed, grammar / JSON schema, max tokens) and a
format version, and nothing that does not (paths, thread counts, GPU layers).
Callers build the ``request`` dict accordingly; this module only hashes it.

Entries are JSON with their own checksum, so a truncated or tampered entry is
detected, reported once and treated as a miss (then overwritten).

Several processes may share one cache (two specs run side by side over one corpus).
``get_or_compute`` claims a key before computing it, so a second process asking for a
call another is computing waits for that result instead of paying for it again. A
claim names its process; one whose process is gone (killed mid-call) or that is older
than ``CLAIM_TTL_S`` (a process on another host) is stale and taken over.

A run must be able to say exactly which entries it used, so that a bundle ships those
and no others: ``recording()`` collects every key looked up or stored while it is
open (hits and computed calls alike), and the runner keeps each step's keys with its
artefact. A ``sealed`` cache (a replay's) answers from its entries only: a miss is an
error, never a model call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import psutil

from kgrag.errors import KgragError

CACHE_FORMAT = 1
CLAIM_TTL_S = 3600.0  # far longer than one model call; bounds a claim no pid check can clear
CLAIM_POLL_S = 0.2
log = logging.getLogger(__name__)


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def request_key(namespace: str, request: dict[str, Any]) -> str:
    """The cache key of one model request: sha256 over the canonical request."""
    body = canonical_json({"format": CACHE_FORMAT, "ns": namespace, "request": request})
    return f"{namespace}:{hashlib.sha256(body.encode()).hexdigest()}"


@dataclass(frozen=True)
class CacheStats:
    """Counts per model, kept inside the cache so they persist across runs."""

    entries: int
    size_bytes: int
    by_model: dict[str, dict[str, int]]


class CallCache:
    """A diskcache-backed store of model outputs with integrity checks."""

    def __init__(self, directory: Path, *, sealed: bool = False) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(directory), size_limit=2**40, eviction_policy="none")
        except OSError as exc:
            raise KgragError(f"cannot open the model-call cache at {directory}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise KgragError(f"the model-call cache at {directory} is damaged ({exc}); move or "
                             "delete that folder (its calls will be recomputed)") from exc
        self.directory = directory
        self.sealed = sealed
        self._recordings: list[set[str]] = []

    @contextmanager
    def recording(self) -> Iterator[set[str]]:
        """Yield a set that collects every key used until the block ends."""
        keys: set[str] = set()
        self._recordings.append(keys)
        try:
            yield keys
        finally:
            self._recordings.remove(keys)

    def _used(self, keys: list[str]) -> None:
        for recording in self._recordings:
            recording.update(keys)

    def _refuse_misses(self, keys: list[str], model: str) -> None:
        if self.sealed and keys:
            raise KgragError(
                f"the sealed cache at {self.directory} holds no entry for {len(keys)} request(s) "
                f"of {model} (first: {keys[0]}); a replay makes no model call, so the bundle "
                "must hold every call the run makes (was it made by another kgrag version?)")

    def get_or_compute(self, key: str, model: str, compute: Callable[[], dict[str, Any]]
                       ) -> tuple[dict[str, Any], bool]:
        """The payload for ``key`` and whether this call computed it.

        A hit returns at once. On a miss this process claims the key and computes it;
        if another live process holds the claim, this one sleeps (no CPU) until that
        result is stored, and counts it as a hit.
        """
        claim = f"claim:{key}"
        self._used([key])
        while True:
            payload = self._load(key)
            if payload is not None:
                self._count(model, "hits")
                return payload, False
            self._refuse_misses([key], model)
            if self._cache.add(claim, _holder(), expire=CLAIM_TTL_S):
                try:
                    payload = compute()
                    self.set(key, payload)
                finally:
                    self._cache.delete(claim)
                self._count(model, "misses")
                return payload, True
            holder = self._cache.get(claim)
            if holder is not None and not _alive(holder):
                with self._cache.transact():  # clear it unless another waiter already did
                    if self._cache.get(claim) == holder:
                        self._cache.delete(claim)
                continue
            time.sleep(CLAIM_POLL_S)

    def set(self, key: str, payload: dict[str, Any]) -> None:
        """Store ``payload`` under ``key`` with a checksum."""
        body = canonical_json(payload)
        digest = hashlib.sha256(body.encode()).hexdigest()
        self._cache.set(key, f"{digest}\n{body}".encode())

    def get_many(self, keys: list[str], model: str) -> list[dict[str, Any] | None]:
        """Batch lookup (one transaction) for embedding-sized workloads."""
        self._used(keys)
        with self._cache.transact():
            raws = [self._cache.get(k) for k in keys]
        payloads = [None if r is None else self._decode(k, r) for k, r in zip(keys, raws)]
        self._refuse_misses([k for k, p in zip(keys, payloads) if p is None], model)
        hits = sum(p is not None for p in payloads)
        self._count(model, "hits", hits)
        self._count(model, "misses", len(keys) - hits)
        return payloads

    def set_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Batch store in one transaction."""
        with self._cache.transact():
            for key, payload in items:
                self.set(key, payload)

    def entries(self, keys: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, payload) of each key, for a bundle; counts nothing. Raises when entries
        are gone (the cache was cleared since the run), naming how many and one of them."""
        missing = []
        for key in keys:
            payload = self._load(key)
            if payload is None:
                missing.append(key)
            elif not missing:
                yield key, payload
        if missing:
            raise KgragError(
                f"the cache at {self.directory} no longer holds {len(missing)} of the entries "
                f"the run used (first: {missing[0]}); run the spec again with --force corpus "
                "to recompute them")

    def _load(self, key: str) -> dict[str, Any] | None:
        """The payload stored under ``key``; None when absent or corrupt."""
        raw = self._cache.get(key)
        return None if raw is None else self._decode(key, raw)

    def _decode(self, key: str, raw: Any) -> dict[str, Any] | None:
        try:
            digest, body = bytes(raw).decode().split("\n", 1)
            if hashlib.sha256(body.encode()).hexdigest() != digest:
                raise ValueError("checksum mismatch")
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise TypeError("not an object")
            return payload
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            log.warning("corrupt cache entry %s (%s) in %s: treated as missing and deleted",
                        key, exc, self.directory)
            self._cache.delete(key)
            return None

    def _count(self, model: str, what: str, n: int = 1) -> None:
        if n:
            self._cache.incr(f"stats:{model}:{what}", n, default=0)

    def stats(self) -> CacheStats:
        """Entry count (model outputs only), size on disk and hits/misses by model."""
        by_model: dict[str, dict[str, int]] = {}
        entries = 0
        for key in self._cache.iterkeys():
            if key.startswith("claim:"):
                continue
            if key.startswith("stats:"):
                model, what = key[len("stats:"):].rsplit(":", 1)
                by_model.setdefault(model, {"hits": 0, "misses": 0})[what] = int(self._cache[key])
            else:
                entries += 1
        return CacheStats(entries=entries, size_bytes=int(self._cache.volume()), by_model=by_model)

    def clear(self) -> int:
        """Remove every entry and counter; returns how many there were."""
        return int(self._cache.clear())

    def close(self) -> None:
        self._cache.close()


def _holder() -> dict[str, Any]:
    """Who claims a key: host, pid and the process's start time (pids are reused)."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "started": psutil.Process().create_time()}


def _alive(holder: dict[str, Any]) -> bool:
    """Whether a claim's process still runs; a process on another host is assumed to
    (its claim then expires after ``CLAIM_TTL_S``)."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        return psutil.Process(holder["pid"]).create_time() == holder["started"]
    except (psutil.Error, KeyError):
        return False
