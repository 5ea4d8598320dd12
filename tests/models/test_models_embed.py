"""The cached embedder against raw sentence-transformers (real bundled model)."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgrag.models.cache import CallCache
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings, SentenceTransformerBackend
from kgrag.models.registry import resolve_embedder
from tests.conftest import REPO, SHARED_DATA


@pytest.fixture(scope="module")
def settings() -> EmbedderSettings:
    m = resolve_embedder("all-MiniLM-L6-v2")
    return EmbedderSettings(name=m.name, path=m.path, sha256=m.sha256)


@pytest.fixture(scope="module")
def backend(settings) -> SentenceTransformerBackend:
    return SentenceTransformerBackend(settings)


class CountingBackend:
    def __init__(self, inner) -> None:
        self.inner, self.texts = inner, []

    def encode(self, texts):
        self.texts.extend(texts)
        return self.inner.encode(texts)


def test_vectors_match_raw_encode_and_are_unit_length(cache, settings, backend):
    texts = ["Port Blair is the capital of the Andaman Islands.", "Copenhagen is in Denmark."]
    ours = CachedEmbedder(settings, cache, backend).encode(texts)
    raw = backend.model().encode(texts, normalize_embeddings=True)
    assert ours.shape == (2, 384)
    np.testing.assert_allclose(ours, raw, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_second_encode_is_served_from_cache_and_duplicates_encode_once(cache, settings, backend):
    counting = CountingBackend(backend)
    first = CachedEmbedder(settings, cache, counting)
    vectors = first.encode(["alpha", "beta", "alpha"])
    assert counting.texts == ["alpha", "beta"]
    np.testing.assert_array_equal(vectors[0], vectors[2])
    assert first.usage.calls == 2
    again = CachedEmbedder(settings, cache, CountingBackend(backend))
    np.testing.assert_array_equal(again.encode(["beta", "alpha"]), vectors[[1, 0]])
    assert again.usage.calls == 0 and again.usage.cache_hits == 2
    assert again.backend.texts == []


# --- embeddings are claimed and saved a batch at a time: none is paid twice ---

def paragraphs(n: int) -> list[str]:
    """``n`` distinct real paragraphs (MuSiQue's), the texts a corpus step embeds."""
    texts: dict[str, None] = {}
    with open(SHARED_DATA / "musique_200.jsonl") as handle:
        for line in handle:
            for paragraph in json.loads(line)["paragraphs"]:
                texts[paragraph["paragraph_text"]] = None
                if len(texts) == n:
                    return list(texts)
    raise AssertionError(f"fewer than {n} paragraphs")


def embed_in_another_process(folder: str, texts: list[str], ready: Any, results: Any) -> None:
    """A second process's run: load the real embedder, wait for the other process to be
    as far, then embed the same texts through the shared cache folder."""
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)
    cache = CallCache(Path(folder))
    embedder = CachedEmbedder(settings, cache)
    embedder.backend.model()  # loaded before the race starts, so both start together
    ready.wait()
    vectors = embedder.encode(texts)
    results.put((embedder.usage.calls, vectors.tobytes()))
    cache.close()


def test_two_processes_embedding_the_same_texts_pay_each_once(tmp_path):
    """Was: two runs started together paid 1,166 embeddings for 583 texts."""
    texts = paragraphs(120)
    texts = texts + texts[:10]  # a repeated text is embedded once as well
    spawn = multiprocessing.get_context("spawn")
    ready, results = spawn.Barrier(2), spawn.Queue()
    workers = [spawn.Process(target=embed_in_another_process,
                             args=(str(tmp_path / "calls"), texts, ready, results))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    done = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert sum(calls for calls, _ in done) == 120
    assert done[0][1] == done[1][1]  # the waiting process got the same vectors


KILLED_MIDWAY = """
import json, sys
from pathlib import Path
from kgrag.models.cache import CallCache
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
from kgrag.models.registry import resolve_embedder

model = resolve_embedder("all-MiniLM-L6-v2")
settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256,
                            batch_size=8)
CachedEmbedder(settings, CallCache(Path(sys.argv[1]))).encode(json.loads(sys.argv[2]))
"""


def test_a_killed_embedding_keeps_its_saved_batches(tmp_path, settings, backend):
    """Was: killed 15 s into embedding, a run had saved nothing and paid it all again."""
    texts = paragraphs(120)
    folder = tmp_path / "calls"
    worker = subprocess.Popen([sys.executable, "-c", KILLED_MIDWAY, str(folder),
                               json.dumps(texts)], env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 240
        while _entries(folder) == 0 and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.kill()  # as a user's kill -9 or an out-of-memory kill would
        worker.wait()
    saved = _entries(folder)
    assert 8 <= saved < len(texts)  # killed with batches saved and batches to do
    cache = CallCache(folder)
    counting = CountingBackend(backend)
    vectors = CachedEmbedder(dataclasses.replace(settings, batch_size=8), cache,
                             counting).encode(texts)
    # every text is embedded once in all, so none of the saved batches was recomputed
    assert len(counting.texts) == len(set(counting.texts)) == len(texts) - saved
    np.testing.assert_allclose(vectors[:8], backend.encode(texts[:8]), atol=1e-5)
    cache.close()


def _entries(folder: Path) -> int:
    if not folder.exists():
        return 0
    cache = CallCache(folder)
    try:
        return cache.stats().entries
    finally:
        cache.close()
