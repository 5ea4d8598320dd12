"""Local models behind small interfaces, each wrapped by the shared disk cache."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import Any, TypeVar

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.backend import EmbedBackend, LLMBackend, LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.embed.backends import TORCH, backend, identity
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
from kgrag.models.executor import Executor, LocalExecutor, ThreadedExecutor
from kgrag.models.llm import CachedLLM
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
# What ``Models.describe`` names each model (by its role); every other embedder a step
# names is ``embedder:<its name in the spec>``.
DESCRIBED = {"llm": "answerer", "extraction_llm": "extractor", "embedder": "embedder"}
OTHER_EMBEDDER = "embedder:"
T = TypeVar("T")


class Models:
    """The models of one spec by role, resolved eagerly (so a bad name fails before any
    work: one error naming every model that does not resolve; with ``strict`` off, asking
    for such a model raises it instead, so that ``differences`` can name them all) and
    loaded lazily (so a fully cached run never loads a model).

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
                 llm_backend: LLMBackend | None = None,
                 embed_backend: EmbedBackend | None = None,
                 executor: Executor | None = None,
                 trained: Mapping[str, str] | None = None, strict: bool = True) -> None:
        self.config = config
        self.cache = cache
        self.executor = executor or LocalExecutor()
        self.base_dir = base_dir  # the spec's folder: relative model paths start there
        # checked first: a runtime that is not installed fails before any work
        self.backend = backend(config["embedder"].get("backend", TORCH)).name
        self._bases = {name: _attempt(partial(resolve_embedder, base, base_dir))
                       for name, base in (trained or {}).items()}
        self._trained: dict[str, ResolvedModel] = {}  # entry name → its model, once bound
        self._stages: set[str] = set()  # the identities of every trained model
        # every embedder named so far (the spec's, strategies', bases, every trained
        # stage), by identity: what steps' configs record and ``embedder_of`` finds
        self._known: dict[str, ResolvedModel] = {
            self.identity(m): m for m in self._bases.values() if isinstance(m, ResolvedModel)}
        llm = _attempt(lambda: resolve_llm_entry(config["llm"], base_dir, "models.llm"))
        self._entries: dict[str, ResolvedModel | KgragError] = {
            "llm": llm,
            "extraction": llm if extraction_model is None else _attempt(
                lambda: resolve_llm_entry(extraction_model, base_dir, "extraction.model"))}
        name = config["embedder"]["model"]
        if name not in self._bases:
            self._entries["embedder"] = _attempt(lambda: self.embedder_model(name))
        self._pipeline = None if pipeline is None else _attempt(
            lambda: resolve_pipeline(pipeline, base_dir))
        failed = [str(v) for v in [*self._bases.values(), *self._entries.values(),
                                   self._pipeline] if isinstance(v, KgragError)]
        if strict and failed:
            raise KgragError("; ".join(dict.fromkeys(failed)))
        self._llm_backend, self._embed_backend = llm_backend, embed_backend
        self._llms: dict[str, CachedLLM] = {}  # by model sha256: one per distinct model
        self._embedders: dict[str, CachedEmbedder] = {}  # likewise

    def model(self, role: str) -> ResolvedModel:
        """The model that plays ``role`` (``ROLES``)."""
        if role == "embedder" and "embedder" not in self._entries:
            return self.embedder_model(self.config["embedder"]["model"])
        return _held(self._entries[ROLES[role]])

    @property
    def pipeline(self) -> ResolvedPipeline | None:
        """The spaCy pipeline that parses (extraction method ``nlp`` or ``hybrid``)."""
        return None if self._pipeline is None else _held(self._pipeline)

    def embedder_model(self, name: str) -> ResolvedModel:
        """An embedder by name: a training entry's model (once compiled), a bundled
        name or a sentence-transformers folder."""
        if name in self._bases:
            if name not in self._trained:
                raise KgragError(f"the trained embedder {name!r} is used before its "
                                 "training steps are planned")
            return self._trained[name]
        try:
            model = resolve_embedder(name, self.base_dir)
        except KgragError as exc:
            if not self._bases:
                raise
            raise KgragError(f"{exc}, nor a training entry ({', '.join(self._bases)})") from None
        self._known[self.identity(model)] = model
        return model

    def identity(self, model: ResolvedModel) -> str:
        """What names ``model``'s vectors under this spec's backend: its sha256 under
        ``torch``, else a hash of both (``kgrag.models.embed.backends.identity``)."""
        return identity(model.sha256, self.backend)

    def bind(self, name: str, stages: Sequence[tuple[Path, str]]) -> None:
        """Training entry ``name``'s models, each stage's (the folder its step writes,
        identified by that step's fingerprint); the last is the entry's."""
        models = [ResolvedModel(name, "embedder", folder, fingerprint, False)
                  for folder, fingerprint in stages]
        self._known |= {self.identity(m): m for m in models}
        self._stages |= {self.identity(m) for m in models}
        self._trained[name] = models[-1]

    def embedder_of(self, named: str) -> CachedEmbedder:
        """The cached embedder of a model this spec names (the embedder, a training
        entry's base or trained model), by identity: what a step's config records."""
        if named in self._known:
            return self.embedder_for(self._known[named])
        raise KgragError(f"no embedder of this spec has identity {named[:12]}")

    def tokenizer_model(self) -> ResolvedModel:
        """Whose tokenizer defines a token: the embedder's, or a trained one's base's."""
        name = self.config["embedder"]["model"]
        return _held(self._bases[name]) if name in self._bases else self.model("embedder")

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
            # what the cache's counters name it: a served model has no file, so the
            # server's name for it
            named = m.name if m.bundled or isinstance(m, ServedModel) else m.path.name
            settings = LLMSettings(
                name=named, path=m.path, sha256=m.sha256,
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
        manifest's names, which landed bundles carry: ``llm``, ``extraction_llm``,
        ``embedder``, ``embedder:<name>`` for every other embedder a step names (a
        strategy's own, a training entry's base) and the spaCy ``pipeline``.

        A step's config holds the identity of every model its output depends on (that is
        what makes its fingerprint change with the model), so a model is named exactly
        when one of the steps uses it: a run that neither answers nor calls an LLM while
        building names no LLM, whatever ``models.llm`` says. The extraction LLM is named
        apart only when it is another model than ``models.llm``; a trained embedder only
        as the spec's ``embedder`` (it is the run's own work, not a model to bring)."""
        named = list(_nodes(list(configs)))
        identities = {node for node in named if isinstance(node, str)}
        llm = self.model("answerer")
        described = {}
        for key, role in DESCRIBED.items():
            m = self.model(role)
            named_by = self.identity(m) if role == "embedder" else m.sha256
            if named_by in identities and (key != "extraction_llm" or m.sha256 != llm.sha256):
                described[key] = _about(m)
        spec_embedder = self.identity(self.model("embedder"))
        for known, m in sorted(self._known.items(), key=lambda item: item[1].name):
            if known in identities and known != spec_embedder and known not in self._stages:
                described[OTHER_EMBEDDER + m.name] = _about(m)
        if self.pipeline is not None and self.pipeline.identity() in named:
            described["pipeline"] = {"name": self.pipeline.name, **self.pipeline.identity()}
        return described

    def differences(self, recorded: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Each model of a description (``describe``, a bundle's) that this machine lacks
        or holds in another version, asked of this spec's models under the same names. A
        trained embedder is not compared: a replay trains it again, and its identity is
        its training step's fingerprint, which the replayed plan must match."""
        problems = []
        for key, was in recorded.items():
            if key == "pipeline":
                problems += self._pipeline_differences(was)
                continue
            try:
                found = self._described(key)
            except KgragError as exc:
                problems.append(f"model {was['name']} ({key}, sha256 {was['sha256'][:16]}…) "
                                f"is missing here: {exc}")
                continue
            if found is not None and found.sha256 != was["sha256"]:
                where = found.url if isinstance(found, ServedModel) else found.path
                problems.append(f"model {was['name']} ({key}) differs: the bundle was made "
                                f"with sha256 {was['sha256'][:16]}…, {where} has "
                                f"{found.sha256[:16]}…")
        return problems

    def _described(self, key: str) -> ResolvedModel | None:
        """The model that ``describe`` names ``key`` (None: a trained embedder)."""
        if key in DESCRIBED:
            trained = DESCRIBED[key] == "embedder" and self.config["embedder"]["model"] in (
                self._bases)
            return None if trained else self.model(DESCRIBED[key])
        name = key.removeprefix(OTHER_EMBEDDER)
        return None if name in self._bases else self.embedder_model(name)

    def _pipeline_differences(self, was: Mapping[str, Any]) -> list[str]:
        expected = {k: v for k, v in was.items() if k != "name"}
        try:
            found = self.pipeline
        except KgragError as exc:
            return [f"spaCy pipeline {was['name']} is missing here: {exc}"]
        here = None if found is None else found.identity()
        if here == expected:
            return []
        differs = (f"spaCy pipeline {was['name']} differs: the bundle was made with "
                   f"{expected}, here it is {here}")
        return [differs]


def _attempt(resolve: Callable[[], T]) -> T | KgragError:
    """What ``resolve()`` returns, or the ``KgragError`` it raises."""
    try:
        return resolve()
    except KgragError as exc:
        return exc


def _held(value: T | KgragError) -> T:
    """``value``, unless it is the error that resolving it raised."""
    if isinstance(value, KgragError):
        raise value
    return value


def _about(model: ResolvedModel) -> dict[str, str]:
    """A model as a description names it: its name, identity and where it is."""
    return {"name": model.name, "sha256": model.sha256} | (
        {"server": model.url} if isinstance(model, ServedModel) else {"path": str(model.path)})


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
