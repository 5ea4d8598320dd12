"""The embedder interface: sentence-transformers or an exported copy of its model on an
optimised runtime (``kgrag.models.embed.backends``), cached per text on disk."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.host import usable_cores
from kgrag.models.backend import EmbedBackend
from kgrag.models.cache import CallCache, request_key
from kgrag.models.embed.backends import TORCH, backend
from kgrag.models.embed.runtime import ExportedBackend, calibration_texts
from kgrag.models.executor import Executor, LocalExecutor, Work
from kgrag.models.offline import offline
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
    """sentence-transformers on the CPU, loaded from a local folder only, on torch's own
    number of threads held to the cores this process may use (``usable_cores``: on a Ray
    worker, the CPUs Ray gave it)."""

    def __init__(self, settings: EmbedderSettings) -> None:
        self.settings = settings
        self._model: Any = None

    def model(self) -> Any:
        if self._model is None:
            offline()
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(min(torch.get_num_threads(), usable_cores()))
            try:
                self._model = SentenceTransformer(str(self.settings.path), device="cpu")
            except (OSError, ValueError) as exc:
                raise KgragError(f"cannot load embedder {self.settings.path}: {exc}") from exc
        return self._model

    def __getstate__(self) -> dict[str, Any]:
        """A copy sent to a Ray worker loads its own model."""
        return {**self.__dict__, "_model": None}

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
        self._exporting = threading.Lock()  # held while a miss exports the model

    @property
    def usage(self) -> Usage:
        return self.calls.usage

    def _key(self, text: str) -> str:
        # the backend only where it is not torch: the keys made before backends existed
        # are torch's, and keep their vectors
        chosen = {} if self.settings.backend == TORCH else {"backend": self.settings.backend}
        return request_key("embed", {"model_sha256": self.settings.sha256, "normalize": True,
                                     "text": text, **chosen})

    def encode(self, texts: list[str], executor: Executor | None = None,
               progress: Progress | None = None) -> np.ndarray:
        """Vectors for ``texts`` in order, a batch of ``batch_size`` texts at a time.

        Each batch's misses are claimed in the cache, encoded in one backend call and
        stored before the batch counts as done, so a kill loses at most one batch's work
        per worker, and a second process embedding the same texts waits for this one's
        vectors instead of computing them again (``CallCache.get_or_compute_many``). The
        distinct texts are batched longest first, as sentence-transformers orders the
        texts of one call, so that a batch pads its texts to a length near their own
        (small batches of mixed lengths would spend much of their time on padding).
        ``executor`` (this process by default) computes the batches' misses: on Ray,
        several batches at once, each by a worker's own copy of the backend; the batches
        are the same, so the vectors are too. Progress is reported per batch (a hundred
        thousand sentences take minutes), on ``progress`` where a caller embeds in
        several calls, else on a count of its own.
        """
        unique = sorted(dict.fromkeys(texts), key=len, reverse=True)
        size = self.settings.batch_size
        batches = [unique[start:start + size] for start in range(0, len(unique), size)]
        report = progress or Progress("embed", len(texts), unit="text")

        def counted(done: Iterable[list[np.ndarray]]) -> Iterator[None]:
            for batch in done:
                report.tick(len(batch))
                yield None

        encoded = (executor or LocalExecutor()).map_work(
            Encoding(self.backend), self._encode_batch, batches, counted)
        if len(texts) > len(unique):
            report.tick(len(texts) - len(unique))  # repeats of a text in hand
        if progress is None:
            report.close()
        vectors = {text: vector for batch, found in zip(batches, encoded)
                   for text, vector in zip(batch, found)}
        self.calls.repeated(len(texts) - len(unique))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([vectors[t] for t in texts])

    def _encode_batch(self, work: Work, texts: list[str]) -> list[np.ndarray]:
        """The vectors of distinct ``texts``, from the cache or computed by ``work`` and
        stored."""
        def compute(todo: list[int]) -> list[dict[str, Any]]:
            self._export()
            return work([texts[i] for i in todo])

        found, _ = self.calls.many([self._key(t) for t in texts], compute)
        return [np.frombuffer(base64.b64decode(f["vector"]), dtype=np.float32) for f in found]

    def _export(self) -> None:
        """Before a miss is computed, an exported backend's model exported in this
        process (all its cores; checked once, ``ExportedBackend.export``): sent to Ray
        workers, each copy would otherwise export on its one CPU while the other workers
        wait on its lock."""
        if isinstance(self.backend, ExportedBackend):
            with self._exporting:
                self.backend.export()


class Encoding:
    """The work of embedding a batch: texts to their cache payloads, by ``backend`` (which
    loads its model on its first batch, once per Ray worker it is sent to)."""

    def __init__(self, backend: EmbedBackend) -> None:
        self.backend = backend

    def __call__(self, texts: list[str]) -> list[dict[str, Any]]:
        return [{"vector": base64.b64encode(vec.tobytes()).decode()}
                for vec in self.backend.encode(texts)]


def runner(settings: EmbedderSettings, cache: CallCache) -> EmbedBackend:
    """What computes ``settings``' vectors: sentence-transformers, or the exported model
    on its runtime, exported into the cache folder (beside the vectors it makes)."""
    chosen = backend(settings.backend)
    if chosen.name == TORCH:
        return SentenceTransformerBackend(settings)
    return ExportedBackend(settings.path, settings.sha256, chosen,
                           cache.directory / "exported-embedders", calibration_texts)
