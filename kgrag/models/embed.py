"""The embedder interface: sentence-transformers, cached per text on disk."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.models.cache import CallCache, request_key
from kgrag.models.usage import Usage
from kgrag.progress import Progress


@dataclass(frozen=True)
class EmbedderSettings:
    """The spec's ``models.embedder`` section, resolved."""

    name: str
    path: Path
    sha256: str
    batch_size: int = 64


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

    def __init__(self, settings: EmbedderSettings, cache: CallCache, backend: Any = None) -> None:
        self.settings = settings
        self.cache = cache
        self.backend = backend if backend is not None else SentenceTransformerBackend(settings)
        self.usage = Usage()

    def _key(self, text: str) -> str:
        return request_key("embed", {"model_sha256": self.settings.sha256, "normalize": True,
                                     "text": text})

    def encode(self, texts: list[str], chunk: int = 1024) -> np.ndarray:
        """Vectors for ``texts`` in order; misses are encoded in one backend call per chunk,
        and progress is reported per chunk (a hundred thousand sentences take minutes)."""
        out: list[np.ndarray] = []
        report = Progress("embed", len(texts), unit="text")
        for start in range(0, len(texts), chunk):
            out.append(self._encode_chunk(texts[start:start + chunk]))
            report.tick(len(out[-1]))
        report.close()
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(out)

    def _encode_chunk(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found = self.cache.get_many(keys, self.settings.name)
        vectors: list[np.ndarray | None] = [
            None if f is None else np.frombuffer(base64.b64decode(f["vector"]), dtype=np.float32)
            for f in found
        ]
        missing = [i for i, v in enumerate(vectors) if v is None]
        unique: dict[str, list[int]] = {}
        for i in missing:
            unique.setdefault(texts[i], []).append(i)
        if unique:
            encoded = self.backend.encode(list(unique))
            new = []
            for (text, positions), vec in zip(unique.items(), encoded):
                for i in positions:
                    vectors[i] = vec
                new.append((keys[positions[0]], {"vector": base64.b64encode(vec.tobytes()).decode()}))
            self.cache.set_many(new)
        self.usage.calls += len(unique)
        self.usage.cache_hits += len(texts) - len(missing)
        return np.stack(vectors)
