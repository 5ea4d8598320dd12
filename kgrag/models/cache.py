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
call another is computing waits for that result instead of paying for it again;
``get_or_compute_many`` does the same for a batch (the embedder's texts). A
claim names its process; one whose process is gone (killed mid-call) or that is older
than ``CLAIM_TTL_S`` (a process on another host) is stale and taken over, and so is one
this process made before it abandoned its calls (``abandon_claims``).

A failure of sqlite or of the cache's folder is one clear error
(``kgrag.models.cache_storage``).

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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import psutil

from kgrag.errors import KgragError, storage_cause
from kgrag.models.cache_storage import storing

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
        self.directory = directory
        self.sealed = sealed
        self._recordings: list[set[str]] = []
        with storing(self.directory):
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                if storage_cause(exc, directory) is not None:
                    raise
                raise KgragError(f"cannot open the model-call cache at {directory}: "
                                 f"{exc}") from exc
            self._cache = diskcache.Cache(str(directory), size_limit=2**40,
                                          eviction_policy="none")

    @contextmanager
    def recording(self) -> Iterator[set[str]]:
        """Yield a set that collects every key used until the block ends."""
        keys: set[str] = set()
        self._recordings.append(keys)
        try:
            yield keys
        finally:
            self._recordings.remove(keys)

    def relied_on(self, keys: list[str]) -> None:
        """Record ``keys`` as used without reading them: a step that takes what they hold
        from an earlier artefact instead still needs them to replay (a bundle ships them)."""
        self._used(keys)

    def _used(self, keys: list[str]) -> None:
        for recording in self._recordings:
            recording.update(keys)

    def _refuse_misses(self, keys: list[str], model: str) -> None:
        if self.sealed and keys:
            raise KgragError(
                f"the sealed cache at {self.directory} holds no entry for {len(keys)} request(s) "
                f"of {model} (first: {keys[0]}); a replay makes no model call, so the bundle "
                "must hold every call the run makes (was it made by another kgrag version?)")

    def get_or_compute_many(self, keys: list[str], model: str,
                            compute: Callable[[list[int]], list[dict[str, Any]]]
                            ) -> tuple[list[dict[str, Any]], list[bool]]:
        """The payload of each of ``keys`` (distinct), and whether this call computed it.

        Hits return at once. The missing keys no other process holds are claimed, in one
        transaction that also skips those stored meanwhile, and computed together by
        ``compute(positions)`` (positions in ``keys``); they are stored before their
        claims are released. Keys a live process holds are waited for (sleeping, no
        CPU), and count as hits, so two processes asking at once pay each key once.
        """
        self._used(keys)
        payloads: list[dict[str, Any] | None] = [None] * len(keys)
        computed = [False] * len(keys)
        pending = list(range(len(keys)))
        while pending:
            for i, payload in zip(pending, self._load_many([keys[i] for i in pending])):
                payloads[i] = payload
            pending = [i for i in pending if payloads[i] is None]
            if not pending:
                break
            self._refuse_misses([keys[i] for i in pending], model)
            mine = self._claim([keys[i] for i in pending])
            if mine:
                todo = [i for i in pending if keys[i] in mine]
                try:
                    done = compute(todo)
                    self.set_many([(keys[i], payload) for i, payload in zip(todo, done)])
                finally:
                    self._release(mine)
                for i, payload in zip(todo, done):
                    payloads[i], computed[i] = payload, True
                pending = [i for i in pending if payloads[i] is None]
            elif not self._clear_stale([keys[i] for i in pending]):
                time.sleep(CLAIM_POLL_S)
        self._count(model, "hits", len(keys) - sum(computed))
        self._count(model, "misses", sum(computed))
        filled = [payload for payload in payloads if payload is not None]
        assert len(filled) == len(keys), "every key is filled once the loop ends"
        return filled, computed

    def _claim(self, keys: list[str]) -> set[str]:
        """The keys this process now holds: those neither stored nor claimed already."""
        holder = _holder()
        with storing(self.directory), self._cache.transact():
            return {key for key in keys if key not in self._cache
                    and self._cache.add(f"claim:{key}", holder, expire=CLAIM_TTL_S)}

    def _release(self, keys: set[str]) -> None:
        with storing(self.directory), self._cache.transact():
            for key in keys:
                self._cache.delete(f"claim:{key}")

    def _clear_stale(self, keys: list[str]) -> bool:
        """Drop the claims among ``keys`` whose process is gone; whether any key is now
        unclaimed (so it is worth looking again at once rather than after a pause)."""
        alive: dict[tuple, bool] = {}
        freed = False
        with storing(self.directory), self._cache.transact():
            for key in keys:
                holder = self._cache.get(f"claim:{key}")
                if holder is not None:
                    who = tuple(holder.get(k) for k in ("host", "pid", "started", "era"))
                    if who not in alive:
                        alive[who] = _alive(holder)
                    if alive[who]:
                        continue
                    self._cache.delete(f"claim:{key}")
                freed = True
        return freed

    def set(self, key: str, payload: dict[str, Any]) -> None:
        """Store ``payload`` under ``key`` with a checksum."""
        body = canonical_json(payload)
        digest = hashlib.sha256(body.encode()).hexdigest()
        with storing(self.directory):
            self._cache.set(key, f"{digest}\n{body}".encode())

    def get_many(self, keys: list[str], model: str) -> list[dict[str, Any] | None]:
        """Batch lookup (one transaction) for embedding-sized workloads."""
        self._used(keys)
        payloads = self._load_many(keys)
        self._refuse_misses([k for k, p in zip(keys, payloads) if p is None], model)
        hits = sum(p is not None for p in payloads)
        self._count(model, "hits", hits)
        self._count(model, "misses", len(keys) - hits)
        return payloads

    def stored(self, keys: list[str]) -> list[dict[str, Any]]:
        """The payloads of keys this run already looked up or stored, read again; counts
        and records nothing (``get_or_compute_many`` did). A streaming caller reads a
        batch's payloads back when it needs them instead of holding every batch's. Raises
        when one is gone (the cache was cleared meanwhile)."""
        payloads = self._load_many(keys)
        missing = list(dict.fromkeys(k for k, payload in zip(keys, payloads) if payload is None))
        if missing:
            raise KgragError(
                f"the cache at {self.directory} lost {len(missing)} entries while the run "
                f"used them (first: {missing[0]}); run the step again to recompute them")
        return [payload for payload in payloads if payload is not None]

    def set_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Batch store in one transaction."""
        with storing(self.directory), self._cache.transact():
            for key, payload in items:
                self.set(key, payload)

    def entries(self, keys: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, payload) of each key, for a bundle; counts nothing. Raises when entries
        are gone (the cache was cleared since the run), naming how many and one of them."""
        missing = []
        for key in keys:
            (payload,) = self._load_many([key])
            if payload is None:
                missing.append(key)
            elif not missing:
                yield key, payload
        if missing:
            raise KgragError(
                f"the cache at {self.directory} no longer holds {len(missing)} of the entries "
                f"the run used (first: {missing[0]}); run the spec again with --force corpus "
                "to recompute them")

    def _load_many(self, keys: list[str]) -> list[dict[str, Any] | None]:
        """The payloads stored under ``keys``; None where absent or corrupt. Several
        keys are read in one transaction (one lock instead of one per key); a single key
        needs none."""
        with storing(self.directory):
            if len(keys) == 1:
                raws = [self._cache.get(keys[0])]
            else:
                with self._cache.transact():
                    raws = [self._cache.get(k) for k in keys]
        return [None if r is None else self._decode(k, r) for k, r in zip(keys, raws)]

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
            with storing(self.directory):
                self._cache.delete(key)
            return None

    def _count(self, model: str, what: str, n: int = 1) -> None:
        if n:
            with storing(self.directory):
                self._cache.incr(f"stats:{model}:{what}", n, default=0)

    def stats(self) -> CacheStats:
        """Entry count (model outputs only), size on disk and hits/misses by model."""
        by_model: dict[str, dict[str, int]] = {}
        entries = 0
        with storing(self.directory):
            for key in self._cache.iterkeys():
                if key.startswith("claim:"):
                    continue
                if key.startswith("stats:"):
                    model, what = key[len("stats:"):].rsplit(":", 1)
                    by_model.setdefault(model, {"hits": 0, "misses": 0})[what] = int(
                        self._cache[key])
                else:
                    entries += 1
            size = int(self._cache.volume())
        return CacheStats(entries=entries, size_bytes=size, by_model=by_model)

    def clear(self) -> int:
        """Remove every entry and counter; returns how many there were."""
        with storing(self.directory):
            return int(self._cache.clear())

    def close(self) -> None:
        self._cache.close()


_era = 0  # how many times this process abandoned its calls (``abandon_claims``)


def abandon_claims() -> None:
    """Treat every claim this process made so far as stale. A call abandoned by Ctrl-C
    (``kgrag query`` goes back to its prompt) may leave its claim behind, when the
    interrupt lands between claiming and releasing; this process would otherwise wait for
    it, alive as it is, for ``CLAIM_TTL_S`` the next time it asks for that call."""
    global _era
    _era += 1


def _holder() -> dict[str, Any]:
    """Who claims a key: host, pid and the process's start time (pids are reused), and
    how many times the process had abandoned its calls then."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "started": psutil.Process().create_time(), "era": _era}


def _alive(holder: dict[str, Any]) -> bool:
    """Whether a claim's process still runs, and still runs the call (this process's
    claims of an earlier era were abandoned); a process on another host is assumed to
    (its claim then expires after ``CLAIM_TTL_S``)."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        if psutil.Process(holder["pid"]).create_time() != holder["started"]:
            return False
    except (psutil.Error, KeyError):
        return False
    return holder["pid"] != os.getpid() or holder.get("era", 0) == _era
