"""The cached embedder against raw sentence-transformers (real bundled model)."""

from __future__ import annotations

import numpy as np
import pytest

from kgrag.models.embed import CachedEmbedder, EmbedderSettings, SentenceTransformerBackend
from kgrag.models.registry import resolve_embedder


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
