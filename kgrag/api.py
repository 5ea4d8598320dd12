"""The public Python API. The CLI is a thin shell over these functions."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgrag.answer.parts import Part, context_parts
from kgrag.answer.reader import read
from kgrag.answer.spans import occurrence
from kgrag.configuration import default_cache_dir
from kgrag.contents.chunks import chunk_columns, count_chunks, read_chunks
from kgrag.contents.corpus import has_question_table, read_documents, read_questions
from kgrag.contents.metrics import read_metrics
from kgrag.corpus.sources import SOURCE_COLUMNS, chunk_sources
from kgrag.errors import KgragError, Refused
from kgrag.models.cache import CacheStats, CallCache
from kgrag.models.registry import ResolvedModel, bundled_models
from kgrag.outputs import GraphExport, ReplayResult, bundle, export_graph, gc, replay
from kgrag.pipeline.compile import has_questions
from kgrag.pipeline.manifest import Manifest
from kgrag.pipeline.plan import Step
from kgrag.pipeline.runner import forced_steps, run_plan
from kgrag.pipeline.space import check_space
from kgrag.session import Echo, Session, open_session, spec_models, whole
from kgrag.spec.starter import Starter, write_starter
from kgrag.steps import KINDS
from kgrag.steps.retrieve import chunk_units, load_strategy
from kgrag.steps.step import Counts

__all__ = [
    "Citation",
    "Echo",
    "Evidence",
    "GraphExport",
    "PlannedStep",
    "Querier",
    "QueryResult",
    "ReplayResult",
    "RunResult",
    "Session",
    "bundle",
    "cache_clear",
    "cache_stats",
    "dry_run",
    "export_graph",
    "gc",
    "init",
    "models",
    "open_query",
    "open_session",
    "query",
    "replay",
    "report",
    "run",
    "spec_models",
]


CHARS_PER_TOKEN = 4  # about what an English token holds: a longer question fills n_ctx alone
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    reuse: bool
    max_llm_calls: int | None


def dry_run(session: Session) -> list[PlannedStep]:
    """What ``run`` would do: each step, whether it would be reused, its LLM-call bound.
    A damaged artefact would be rebuilt, so it counts as not built (and is not read)."""
    reuse = whole(session, session.plan.steps)
    counts = Counts(_known_question_count(session, "corpus" in reuse),
                    _known_chunk_count(session, "chunks" in reuse))
    return [PlannedStep(s, s.name in reuse, KINDS[s.kind].max_llm_calls(s.config, counts))
            for s in session.plan.steps]


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
    reuse = whole(session, session.plan.steps)
    check_space(session.spec.resolve(session.spec.corpus["path"]),
                [s.kind for s in session.plan.steps if s.name in forced or s.name not in reuse],
                session.run_dir)
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, force=force, whole=reuse, echo=echo)
    from kgrag.report.page import write_report  # plotly: only once a run is done

    evaluated = "evaluate" in session.plan.by_name()
    return RunResult(manifest, read_metrics(session.run_dir) if evaluated else None,
                     write_report(session.run_dir))


def report(run: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of a finished run (see ``kgrag.report``): ``run`` is its folder, or
    the spec that wrote it (its folder is then the spec's ``outputs/<name>``), as every
    other command takes a spec."""
    from kgrag.report.page import write_report
    from kgrag.spec.load import load_spec

    folder = Path(run)
    if folder.is_file():
        folder = load_spec(folder).output_dir
    return write_report(folder, None if out is None else Path(out))


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
    contexts: Mapping[str, str]  # chunk id → its text as the LLM reads it

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
        models = self.session.models
        reply = read(models.llm("answerer"), [p.text for p in evidence.parts],
                     evidence.question, answering, evidence.context,
                     models.embedder if answering.get("mode") == "extractive" else None)
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
                        occurrence(answer_text, part.text, ignore_case=True))

    def ask(self, question: str) -> QueryResult:
        """Retrieve for ``question`` and answer it from what was retrieved."""
        return self.answer(self.retrieve(question))


def open_query(spec_path: str | Path, strategy: str | None = None,
               echo: Echo = print) -> Querier:
    """Load one of the spec's strategies for questions (building its index if needed)."""
    session = open_session(spec_path)
    name, step = _query_step(session, strategy)
    index_steps = session.plan.upstream(
        [dep for role, dep in step.inputs.items() if role != "corpus"])
    # a run records the steps it ran in the folder's manifest; a query that builds nothing
    # leaves the last run's (``kgrag report`` reads it) as it was
    reuse = whole(session, index_steps)
    if len(reuse) < len(index_steps):
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=index_steps, whole=reuse, echo=echo)
    inputs = {role: session.artefact(dep) for role, dep in step.inputs.items()}
    # a strategy over chunks: their texts, read once for the strategy and the parts shown
    units = chunk_units(inputs)
    chosen = load_strategy(step.config, inputs, session.models, units)
    documents = read_documents(session.artefact("corpus"), ["doc_id", "title"])
    sources: dict[str, str] = {}
    if units is not None and set(SOURCE_COLUMNS) <= set(chunk_columns(inputs["chunks"])):
        sources = chunk_sources(read_chunks(inputs["chunks"], ["chunk_id", *SOURCE_COLUMNS]))
    return Querier(session, name, step, chosen,
                   dict(zip(documents["doc_id"], documents["title"])), sources,
                   {} if units is None else units.text)


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


