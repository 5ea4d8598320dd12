"""Local models behind small interfaces, each wrapped by the shared disk cache."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.models.cache import CallCache
from kgrag.models.embed import CachedEmbedder, EmbedderSettings
from kgrag.models.executor import Executor, LocalExecutor
from kgrag.models.llm import CachedLLM, LLMSettings
from kgrag.models.pipelines import ResolvedPipeline, resolve_pipeline
from kgrag.models.registry import ResolvedModel, resolve_embedder, resolve_llm
from kgrag.models.usage import Usage

# The spec entry that serves each role. The answering LLM (``models.llm``) answers and
# makes retrieval-time calls (HugRAG's causal filter); the extraction LLM
# (``extraction.model``, else ``models.llm``) makes every knowledge-building call.
ROLES = {"answerer": "llm", "filter": "llm", "extractor": "extraction",
         "summariser": "extraction", "judge": "extraction", "embedder": "embedder"}


class Models:
    """The models of one spec by role, resolved eagerly (so a bad name fails before any
    work) and loaded lazily (so a fully cached run never loads a model).

    ``llm_backend`` / ``embed_backend``, when given, replace llama.cpp and
    sentence-transformers behind the call cache for every model (a stand-in in tests).
    ``executor`` runs steps' model calls over many work items (``kgrag.models.executor``).
    """

    def __init__(self, config: Mapping[str, Any], cache: CallCache, base_dir: Path,
                 extraction_model: str | None = None, pipeline: str | None = None, *,
                 llm_backend: Any = None, embed_backend: Any = None,
                 executor: Executor | None = None) -> None:
        self.config = config
        self.cache = cache
        self.executor = executor or LocalExecutor()
        llm = resolve_llm(config["llm"]["model"], base_dir)
        self._entries: dict[str, ResolvedModel] = {
            "llm": llm,
            "extraction": llm if extraction_model is None
            else resolve_llm(extraction_model, base_dir),
            "embedder": resolve_embedder(config["embedder"]["model"], base_dir)}
        self.pipeline: ResolvedPipeline | None = (
            None if pipeline is None else resolve_pipeline(pipeline, base_dir))
        self._llm_backend, self._embed_backend = llm_backend, embed_backend
        self._llms: dict[str, CachedLLM] = {}  # by model sha256: one per distinct model

    def model(self, role: str) -> ResolvedModel:
        """The model that plays ``role`` (``ROLES``)."""
        return self._entries[ROLES[role]]

    def llm(self, role: str) -> CachedLLM:
        """The cached LLM that plays ``role``; roles served by one model share it."""
        m = self.model(role)
        if m.sha256 not in self._llms:
            c = self.config["llm"]
            settings = LLMSettings(
                name=m.name if m.bundled else m.path.name, path=m.path, sha256=m.sha256,
                n_ctx=c["n_ctx"], temperature=c["temperature"], top_p=c["top_p"],
                seed=c["seed"], n_threads=c["n_threads"], n_gpu_layers=c["n_gpu_layers"],
                max_retries=c["max_retries"])
            self._llms[m.sha256] = CachedLLM(settings, self.cache, self._llm_backend)
        return self._llms[m.sha256]

    @cached_property
    def embedder(self) -> CachedEmbedder:
        m = self.model("embedder")
        settings = EmbedderSettings(name=m.name if m.bundled else m.path.name, path=m.path,
                                    sha256=m.sha256,
                                    batch_size=self.config["embedder"]["batch_size"])
        return CachedEmbedder(settings, self.cache, self._embed_backend)

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The embedder's tokenizer: kgrag's one definition of a "token" for sizes and budgets."""
        return Tokenizer.from_dir(self.model("embedder").path)

    def usage_snapshot(self) -> tuple[Usage, Usage]:
        """LLM usage (all LLMs together) and embedder usage so far."""
        total = sum((llm.usage for llm in self._llms.values()), Usage())
        embedder = self.__dict__.get("embedder")
        return total, embedder.usage.snapshot() if embedder else Usage()

    def describe(self) -> dict[str, Any]:
        # under the manifest's names, which landed bundles carry
        named = {"llm": "llm", "extraction_llm": "extraction", "embedder": "embedder"}
        described = {}
        for name, entry in named.items():
            m = self._entries[entry]
            described[name] = {"name": m.name, "path": str(m.path), "sha256": m.sha256}
        if self.pipeline is not None:
            described["pipeline"] = {"name": self.pipeline.name, **self.pipeline.identity()}
        return described


def bundled_embedder(cache: CallCache) -> tuple[Tokenizer, CachedEmbedder]:
    """The bundled MiniLM and its tokenizer through ``cache``, outside any spec (benchmarks)."""
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)
    return Tokenizer.from_dir(model.path), CachedEmbedder(settings, cache)
