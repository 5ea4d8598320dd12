"""The embedder interface: sentence-transformers or an exported copy of its model on an
optimised runtime (``kgrag.models.embed_backends``), cached per text on disk."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.models.backend import EmbedBackend
from kgrag.models.cache import CallCache, request_key
from kgrag.models.embed_backends import TORCH, backend
from kgrag.models.usage import CountedCache, Usage
from kgrag.progress import Progress


@dataclass(frozen=True)
class EmbedderSettings:
    """The spec's ``models.embedder`` section, resolved."""

    name: str
    path: Path
    sha256: str
    batch_size: int = 64
    backend: str = TORCH  # a name in ``BACKENDS``


class SentenceTransformerBackend:
    """sentence-transformers on the CPU, loaded from a local folder only."""

    def __init__(self, settings: EmbedderSettings) -> None:
        self.settings = settings
        self._model: Any = None

    def model(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            try:
                self._model = SentenceTransformer(str(self.settings.path), device="cpu")
            except (OSError, ValueError) as exc:
                raise KgragError(f"cannot load embedder {self.settings.path}: {exc}") from exc
        return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, so inner product is cosine similarity."""
        return self.model().encode(
            texts, batch_size=self.settings.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        ).astype(np.float32)


class CachedEmbedder:
    """Embeds through the disk cache: only texts never seen before reach the model."""

    def __init__(self, settings: EmbedderSettings, cache: CallCache,
                 backend: EmbedBackend | None = None) -> None:
        self.settings = settings
        self.cache = cache
        self.backend = backend if backend is not None else runner(settings, cache)
        self.calls = CountedCache(cache, settings.name)

    @property
    def usage(self) -> Usage:
        return self.calls.usage

    def _key(self, text: str) -> str:
        # the backend only where it is not torch: the keys made before backends existed
        # are torch's, and keep their vectors
        chosen = {} if self.settings.backend == TORCH else {"backend": self.settings.backend}
        return request_key("embed", {"model_sha256": self.settings.sha256, "normalize": True,
                                     "text": text, **chosen})

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` in order, a batch of ``batch_size`` texts at a time.

        Each batch's misses are claimed in the cache, encoded in one backend call and
        stored before the next batch begins, so a kill loses at most one batch's work,
        and a second process embedding the same texts waits for this one's vectors
        instead of computing them again (``CallCache.get_or_compute_many``). The
        distinct texts are batched longest first, as sentence-transformers orders the
        texts of one call, so that a batch pads its texts to a length near their own
        (small batches of mixed lengths would spend much of their time on padding).
        Progress is reported per batch (a hundred thousand sentences take minutes).
        """
        unique = sorted(dict.fromkeys(texts), key=len, reverse=True)
        vectors: dict[str, np.ndarray] = {}
        report = Progress("embed", len(unique), unit="text")
        size = self.settings.batch_size
        for start in range(0, len(unique), size):
            batch = unique[start:start + size]
            vectors.update(zip(batch, self._encode_batch(batch)))
            report.tick(len(batch))
        report.close()
        self.calls.repeated(len(texts) - len(unique))  # repeats of a text in hand
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([vectors[t] for t in texts])

    def _encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """The vectors of distinct ``texts``, from the cache or computed and stored."""
        def compute(todo: list[int]) -> list[dict[str, Any]]:
            encoded = self.backend.encode([texts[i] for i in todo])
            return [{"vector": base64.b64encode(vec.tobytes()).decode()} for vec in encoded]

        found, _ = self.calls.many([self._key(t) for t in texts], compute)
        return [np.frombuffer(base64.b64decode(f["vector"]), dtype=np.float32) for f in found]


def runner(settings: EmbedderSettings, cache: CallCache) -> EmbedBackend:
    """What computes ``settings``' vectors: sentence-transformers, or the exported model
    on its runtime, exported into the cache folder (beside the vectors it makes)."""
    chosen = backend(settings.backend)
    if chosen.name == TORCH:
        return SentenceTransformerBackend(settings)
    from kgrag.models.embed_runtime import ExportedBackend, calibration_texts

    return ExportedBackend(settings.path, settings.sha256, chosen,
                           cache.directory / "exported-embedders", calibration_texts)
