"""Local models behind small interfaces, each wrapped by the shared disk cache."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.models.cache import CallCache
from kgrag.models.embed import CachedEmbedder, EmbedderSettings
from kgrag.models.llm import CachedLLM, LLMSettings
from kgrag.models.pipelines import ResolvedPipeline, resolve_pipeline
from kgrag.models.registry import ResolvedModel, resolve_embedder, resolve_llm
from kgrag.models.usage import Usage


class Models:
    """The models of one spec, resolved eagerly (so a bad name fails before any work)
    and loaded lazily (so a fully cached run never loads a model)."""

    def __init__(self, config: Mapping[str, Any], cache: CallCache, base_dir: Path,
                 extraction_model: str | None = None, pipeline: str | None = None) -> None:
        self.config = config
        self.cache = cache
        self.llm_model: ResolvedModel = resolve_llm(config["llm"]["model"], base_dir)
        self.extraction_model: ResolvedModel = (
            self.llm_model if extraction_model is None
            else resolve_llm(extraction_model, base_dir))
        self.embedder_model: ResolvedModel = resolve_embedder(config["embedder"]["model"],
                                                              base_dir)
        self.pipeline: ResolvedPipeline | None = (
            None if pipeline is None else resolve_pipeline(pipeline, base_dir))

    def _cached_llm(self, m: ResolvedModel) -> CachedLLM:
        c = self.config["llm"]
        settings = LLMSettings(
            name=m.name if m.bundled else m.path.name, path=m.path, sha256=m.sha256,
            n_ctx=c["n_ctx"], temperature=c["temperature"], top_p=c["top_p"], seed=c["seed"],
            n_threads=c["n_threads"], n_gpu_layers=c["n_gpu_layers"], max_retries=c["max_retries"],
        )
        return CachedLLM(settings, self.cache)

    @cached_property
    def llm(self) -> CachedLLM:
        return self._cached_llm(self.llm_model)

    @cached_property
    def extraction_llm(self) -> CachedLLM:
        """The LLM of extraction steps: ``extraction.model`` when a spec sets it."""
        if self.extraction_model == self.llm_model:
            return self.llm
        return self._cached_llm(self.extraction_model)

    @cached_property
    def embedder(self) -> CachedEmbedder:
        m = self.embedder_model
        settings = EmbedderSettings(name=m.name if m.bundled else m.path.name, path=m.path,
                                    sha256=m.sha256,
                                    batch_size=self.config["embedder"]["batch_size"])
        return CachedEmbedder(settings, self.cache)

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The embedder's tokenizer: kgrag's one definition of a "token" for sizes and budgets."""
        return Tokenizer.from_dir(self.embedder_model.path)

    def usage_snapshot(self) -> tuple[Usage, Usage]:
        """LLM usage (all LLMs together) and embedder usage so far."""
        llms = {id(x): x for x in (self.__dict__.get("llm"), self.__dict__.get("extraction_llm"))
                if x is not None}
        total = sum((llm.usage for llm in llms.values()), Usage())
        embedder = self.__dict__.get("embedder")
        return total, embedder.usage.snapshot() if embedder else Usage()

    def describe(self) -> dict[str, Any]:
        roles = {"llm": self.llm_model, "extraction_llm": self.extraction_model,
                 "embedder": self.embedder_model}
        described = {role: {"name": m.name, "path": str(m.path), "sha256": m.sha256}
                     for role, m in roles.items()}
        if self.pipeline is not None:
            described["pipeline"] = {"name": self.pipeline.name, **self.pipeline.identity()}
        return described


def bundled_embedder(cache: CallCache) -> tuple[Tokenizer, CachedEmbedder]:
    """The bundled MiniLM and its tokenizer through ``cache``, outside any spec (benchmarks)."""
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)
    return Tokenizer.from_dir(model.path), CachedEmbedder(settings, cache)
