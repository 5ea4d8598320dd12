"""Every LLM backend, and every stand-in tests put behind the call cache, has the
methods ``CachedLLM`` and the executors call (``LLMBackend``); every embedder backend
has ``encode`` (``EmbedBackend``). None of them loads or contacts a model to be built."""

from __future__ import annotations

from pathlib import Path

from kgrag.models.backend import EmbedBackend, LLMBackend
from kgrag.models.embed.backends import BACKENDS
from kgrag.models.embed.embedder import EmbedderSettings, SentenceTransformerBackend
from kgrag.models.embed.runtime import ExportedBackend, calibration_texts
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.ray_actors import RemoteBackend
from kgrag.models.served import ServedModel, ServerBackend
from tests.conftest import TOY_SETTINGS, RefusingBackend, ScriptedBackend
from tests.standin import RuleLLM


class GenerateOnly:
    """Half a backend: it cannot score log-probabilities, nor embed."""

    def generate(self, request: dict) -> None:
        return None


def test_every_llm_backend_and_stand_in_is_an_llm_backend():
    served = ServedModel(name="m", kind="llm", path=Path(), sha256="hf:org/m@1", bundled=False,
                         url="http://127.0.0.1:8080/v1")
    backends = [LlamaCppBackend(TOY_SETTINGS), ServerBackend(served),
                RemoteBackend(lambda: None), RuleLLM(), ScriptedBackend("x"), RefusingBackend()]
    assert all(isinstance(b, LLMBackend) for b in backends)
    assert not isinstance(GenerateOnly(), LLMBackend)  # generate alone is not a backend


def test_every_embedder_backend_is_an_embed_backend(tmp_path):
    settings = EmbedderSettings(name="e", path=tmp_path, sha256="e" * 64)
    exported = ExportedBackend(tmp_path, "e" * 64, BACKENDS["onnx"], tmp_path / "exported",
                               calibration_texts)
    assert isinstance(SentenceTransformerBackend(settings), EmbedBackend)
    assert isinstance(exported, EmbedBackend)
    assert not isinstance(GenerateOnly(), EmbedBackend)
