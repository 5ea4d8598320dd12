"""Local models behind small interfaces, each wrapped by the shared disk cache."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.cache import CallCache
from kgrag.models.embed import CachedEmbedder, EmbedderSettings
from kgrag.models.embed_backends import TORCH, backend, identity
from kgrag.models.executor import Executor, LocalExecutor, ThreadedExecutor
from kgrag.models.llm import CachedLLM, LLMSettings
from kgrag.models.pipelines import ResolvedPipeline, resolve_pipeline
from kgrag.models.registry import ResolvedModel, resolve_embedder
from kgrag.models.served import ServedModel, ServerBackend, no_scoring, resolve_llm_entry
from kgrag.models.usage import Usage

# The spec entry that serves each role. The answering LLM (``models.llm``) answers and
# makes retrieval-time calls (HugRAG's causal filter); the extraction LLM
# (``extraction.model``, else ``models.llm``) makes every knowledge-building call.
# ARK's alignment scores are the answering LLM's log-probabilities ("scorer"); its
# confusing questions are knowledge-building work ("augmenter"), and so is ReG's
# refinement of weak supervision ("refiner").
ROLES = {"answerer": "llm", "filter": "llm", "scorer": "llm", "extractor": "extraction",
         "summariser": "extraction", "judge": "extraction", "augmenter": "extraction",
         "refiner": "extraction",
         "embedder": "embedder"}


class Models:
    """The models of one spec by role, resolved eagerly (so a bad name fails before any
    work) and loaded lazily (so a fully cached run never loads a model).

    ``llm_backend`` / ``embed_backend``, when given, replace llama.cpp and
    sentence-transformers behind the call cache for every model (a stand-in in tests).
    ``executor`` runs steps' model calls over many work items (``kgrag.models.executor``).

    ``trained`` maps the spec's training entries to their base embedders. An embedder
    may name one: its model is the entry's final training step, whose fingerprint is
    its identity (``bind``, when the plan is compiled) and whose tokenizer is its
    base's, so chunks, which training reads, do not depend on the training.

    ``models.embedder.backend`` runs every embedder of the spec; it joins each one's
    identity (``identity``), what steps' configs record and ``embedder_of`` finds.
    """

    def __init__(self, config: Mapping[str, Any], cache: CallCache, base_dir: Path,
                 extraction_model: str | Mapping[str, Any] | None = None,
                 pipeline: str | None = None, *,
                 llm_backend: Any = None, embed_backend: Any = None,
                 executor: Executor | None = None,
                 trained: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.cache = cache
        self.executor = executor or LocalExecutor()
        self._base_dir = base_dir
        # checked first: a runtime that is not installed fails before any work
        self.backend = backend(config["embedder"].get("backend", TORCH)).name
        self._bases = {name: resolve_embedder(base, base_dir)
                       for name, base in (trained or {}).items()}
        self._trained: dict[str, ResolvedModel] = {}  # entry name → its model, once bound
        # every embedder named so far (the spec's, strategies', bases, every trained
        # stage), by identity: what steps' configs record and ``embedder_of`` finds
        self._known: dict[str, ResolvedModel] = {self.identity(m): m
                                                 for m in self._bases.values()}
        llm = resolve_llm_entry(config["llm"], base_dir, "models.llm")
        self._entries: dict[str, ResolvedModel] = {
            "llm": llm,
            "extraction": llm if extraction_model is None
            else resolve_llm_entry(extraction_model, base_dir, "extraction.model")}
        name = config["embedder"]["model"]
        if name not in self._bases:
            self._entries["embedder"] = self.embedder_model(name)
        self.pipeline: ResolvedPipeline | None = (
            None if pipeline is None else resolve_pipeline(pipeline, base_dir))
        self._llm_backend, self._embed_backend = llm_backend, embed_backend
        self._llms: dict[str, CachedLLM] = {}  # by model sha256: one per distinct model
        self._embedders: dict[str, CachedEmbedder] = {}  # likewise

    def model(self, role: str) -> ResolvedModel:
        """The model that plays ``role`` (``ROLES``)."""
        if role == "embedder" and "embedder" not in self._entries:
            return self.embedder_model(self.config["embedder"]["model"])
        return self._entries[ROLES[role]]

    def embedder_model(self, name: str) -> ResolvedModel:
        """An embedder by name: a training entry's model (once compiled), a bundled
        name or a sentence-transformers folder."""
        if name in self._bases:
            if name not in self._trained:
                raise KgragError(f"the trained embedder {name!r} is used before its "
                                 "training steps are planned")
            return self._trained[name]
        try:
            model = resolve_embedder(name, self._base_dir)
        except KgragError as exc:
            if not self._bases:
                raise
            raise KgragError(f"{exc}, nor a training entry ({', '.join(self._bases)})") from None
        self._known[self.identity(model)] = model
        return model

    def identity(self, model: ResolvedModel) -> str:
        """What names ``model``'s vectors under this spec's backend: its sha256 under
        ``torch``, else a hash of both (``kgrag.models.embed_backends.identity``)."""
        return identity(model.sha256, self.backend)

    def bind(self, name: str, stages: Sequence[tuple[Path, str]]) -> None:
        """Training entry ``name``'s models, each stage's (the folder its step writes,
        identified by that step's fingerprint); the last is the entry's."""
        models = [ResolvedModel(name, "embedder", folder, fingerprint, False)
                  for folder, fingerprint in stages]
        self._known |= {self.identity(m): m for m in models}
        self._trained[name] = models[-1]

    def embedder_of(self, named: str) -> CachedEmbedder:
        """The cached embedder of a model this spec names (the embedder, a training
        entry's base or trained model), by identity: what a step's config records."""
        if named in self._known:
            return self.embedder_for(self._known[named])
        raise KgragError(f"no embedder of this spec has identity {named[:12]}")

    def tokenizer_model(self) -> ResolvedModel:
        """Whose tokenizer defines a token: the embedder's, or a trained one's base's."""
        return self._bases.get(self.config["embedder"]["model"]) or self.model("embedder")

    def embedder_for(self, model: ResolvedModel) -> CachedEmbedder:
        """The cached embedder of ``model``; one per model identity."""
        if model.sha256 not in self._embedders:
            settings = EmbedderSettings(name=model.name if model.bundled else model.path.name,
                                        path=model.path, sha256=model.sha256,
                                        batch_size=self.config["embedder"]["batch_size"],
                                        backend=self.backend)
            self._embedders[model.sha256] = CachedEmbedder(settings, self.cache,
                                                           self._embed_backend)
        return self._embedders[model.sha256]

    def llm(self, role: str) -> CachedLLM:
        """The cached LLM that plays ``role``; roles served by one model share it. A
        served model's misses go to its server (``kgrag.models.served``)."""
        m = self.model(role)
        if role == "scorer" and isinstance(m, ServedModel):
            raise no_scoring(m, self._where(m))
        if m.sha256 not in self._llms:
            c = self.config["llm"]
            backend = self._llm_backend
            if backend is None and isinstance(m, ServedModel):
                backend = ServerBackend(m, self._where(m))
            settings = LLMSettings(
                name=m.name if m.bundled else m.path.name, path=m.path, sha256=m.sha256,
                n_ctx=c["n_ctx"], temperature=c["temperature"], top_p=c["top_p"],
                seed=c["seed"], n_threads=c["n_threads"], n_gpu_layers=c["n_gpu_layers"],
                max_retries=c["max_retries"])
            self._llms[m.sha256] = CachedLLM(settings, self.cache, backend)
        return self._llms[m.sha256]

    def _where(self, model: ServedModel) -> str:
        """The spec key that names a served model (for messages)."""
        return "models.llm" if model is self._entries["llm"] else "extraction.model"

    def executor_for(self, role: str) -> Executor:
        """Where the calls of ``role``'s work items run: a served model's ``concurrency``
        items at a time (its server batches them), else the spec's executor."""
        m = self.model(role)
        if isinstance(m, ServedModel) and m.concurrency > 1 and isinstance(self.executor,
                                                                          LocalExecutor):
            return ThreadedExecutor(m.concurrency)
        return self.executor

    @property
    def embedder(self) -> CachedEmbedder:
        return self.embedder_for(self.model("embedder"))

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The embedder's tokenizer: kgrag's one definition of a "token" for sizes and budgets."""
        return Tokenizer.from_dir(self.tokenizer_model().path)

    def usage_snapshot(self) -> tuple[Usage, Usage]:
        """LLM usage (all LLMs together) and embedder usage so far."""
        total = sum((llm.usage for llm in self._llms.values()), Usage())
        embedded = sum((e.usage for e in self._embedders.values()), Usage())
        return total, embedded

    def describe(self, configs: Iterable[Any]) -> dict[str, Any]:
        """The models that ``configs`` (the configs of a run's steps) name, under the
        manifest's names, which landed bundles carry.

        A step's config holds the identity of every model its output depends on (that is
        what makes its fingerprint change with the model), so a model is named exactly
        when one of the steps uses it: a run that neither answers nor calls an LLM while
        building names no LLM, whatever ``models.llm`` says. The extraction LLM is named
        apart only when it is another model than ``models.llm``."""
        named = list(_nodes(list(configs)))
        identities = {node for node in named if isinstance(node, str)}
        llm = self.model("answerer")
        described = {}
        for name, role in {"llm": "answerer", "extraction_llm": "extractor",
                           "embedder": "embedder"}.items():
            m = self.model(role)
            named_by = self.identity(m) if role == "embedder" else m.sha256
            if named_by in identities and (name != "extraction_llm" or m.sha256 != llm.sha256):
                described[name] = {"name": m.name, "sha256": m.sha256} | (
                    {"server": m.url} if isinstance(m, ServedModel) else {"path": str(m.path)})
        if self.pipeline is not None and self.pipeline.identity() in named:
            described["pipeline"] = {"name": self.pipeline.name, **self.pipeline.identity()}
        return described


def _nodes(value: Any) -> Iterator[Any]:
    """``value`` and everything nested in it (a JSON-like tree of dicts and lists)."""
    yield value
    children = value.values() if isinstance(value, Mapping) else (
        value if isinstance(value, list | tuple) else ())
    for child in children:
        yield from _nodes(child)


def bundled_embedder(cache: CallCache) -> tuple[Tokenizer, CachedEmbedder]:
    """The bundled MiniLM and its tokenizer through ``cache``, outside any spec (benchmarks)."""
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)
    return Tokenizer.from_dir(model.path), CachedEmbedder(settings, cache)
