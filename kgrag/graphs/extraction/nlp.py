"""LLM-free extraction of entities and relationships with a spaCy pipeline.

Why: LLM extraction with the bundled 135M model costs seconds per chunk and keeps
few entities per chunk, so no graph method runs at corpus scale. A small spaCy
pipeline parses a paragraph in tens of milliseconds, and what it finds is grounded by
construction: every name is a span of the text (or the chunk's title). LazyGraphRAG
builds its concept graph the same way (noun phrases and their co-occurrence, no LLM
at indexing). The output is the LLM path's ``Extraction``, so ``merge`` builds the
same entity and relationship tables and every graph build and strategy works on it
unchanged.

Entities are the mentions of ``kgrag.graphs.mentions``, described by the sentence
that first mentions them; the chunk's title, when the retrieval unit shows one, is an
entity described by the chunk's first sentence.

Relationships join two entities mentioned in one sentence whose spans do not overlap
and which are close in its parse, at most ``MAX_ARCS`` dependency arcs apart, or
of which one is the title (the paragraph's topic relates to what its sentences say
about it). The label comes from the dependency path ("directed by", "born in",
"brother of"; see ``_label``), or for a date in a life span's brackets from its place
("born", "died"; see ``_lifespan``). A labelled relationship has strength 8 and the
description ``<label>: <sentence>``; an unlabelled pair is a co-occurrence edge of
strength 2 described by the sentence, so that local search ranks grammatical
relations first and ``merge``'s weight (the sum over chunks) counts co-occurrences.
A pair repeated within a chunk is one relationship, as on the LLM path.

``ExtractionCounts`` keep their meaning: raw entities are candidate mentions, empty
ones those the filters dropped, raw relationships the related pairs, invalid ones a
title paired with its own mention; nothing is ungrounded.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kgrag.graphs.elements import Entity, Extraction, ExtractionCounts, Relationship
from kgrag.graphs.mentions import (
    DASHES,
    Mention,
    Title,
    sentence_mentions,
    title_mentions,
)
from kgrag.graphs.merge import add_relationship
from kgrag.graphs.names import single_spaces
from kgrag.models.cache import CallCache, request_key
from kgrag.models.executor import Executor, LocalExecutor
from kgrag.models.pipelines import ResolvedPipeline, load_pipeline

NLP_EXTRACTOR_VERSION = "2"  # bump when a rule here or in mentions.py changes its output
BATCH_SIZE = 64
STREAM_BATCH = 1000  # chunks whose extractions are read back from the cache at a time
LABELLED_STRENGTH = 8
COOCCURRENCE_STRENGTH = 2
# Two mentions relate when at most this many dependency arcs part them: a verb's
# subject and object (2), or a verb, its preposition and that one's object (3).
# On 2Wiki's gold triples, relating every pair in a sentence barely adds triple recall
# and about doubles the relationships, each of them embedded by a skeleton build; two
# arcs lose a little recall (docs/results.md, "Extraction at corpus scale").
MAX_ARCS = 3


def extract_parse(doc: Any, title: str | None
                  ) -> tuple[tuple[Entity, ...], tuple[Relationship, ...], ExtractionCounts]:
    """Entities and relationships of one parsed chunk (a spaCy ``Doc``), deterministically."""
    counts: Counter[str] = Counter()
    entities: dict[str, Entity] = {}
    relationships: dict[frozenset[str], Relationship] = {}
    sentences = list(doc.sents)
    topic = Title.of(title) if title else None
    if topic:
        counts["entities_raw"] += 1
        opening = single_spaces(sentences[0].text) if sentences else ""
        entities[topic.name] = Entity(topic.name, "other", opening, True)
    for k, sentence in enumerate(sentences):
        described = single_spaces(sentence.text)
        found = sentence_mentions(sentence, counts)
        if topic:
            referring = title_mentions(sentence, found, topic, first=k == 0)
            counts["entities_raw"] += len(referring)
            found += referring
        for mention in found:
            _add_entity(entities, mention, described, counts)
        for a, b in _pairs(found):
            up_a, up_b = _path(doc[a.root], doc[b.root])
            titled = topic is not None and topic.name in (a.name, b.name)
            if not titled and len(up_a) + len(up_b) - 2 > MAX_ARCS:
                continue
            counts["relationships_raw"] += 1
            if a.name == b.name:
                counts["relationships_invalid"] += 1
                continue
            label = _label(up_b, up_a) or _lifespan(doc, a, b)
            add_relationship(relationships, Relationship(
                a.name, b.name, f"{label}: {described}" if label else described,
                LABELLED_STRENGTH if label else COOCCURRENCE_STRENGTH, True), counts)
    return tuple(entities.values()), tuple(relationships.values()), ExtractionCounts(**counts)


def _add_entity(entities: dict[str, Entity], mention: Mention, sentence: str,
                counts: Counter[str]) -> None:
    """Keep the first mention of a name; a named-entity type replaces a vaguer one."""
    kept = entities.get(mention.name)
    if kept is None:
        entities[mention.name] = Entity(mention.name, mention.type, sentence, True)
        return
    counts["entities_duplicate"] += 1
    if kept.type in ("other", "concept") and mention.type not in ("other", "concept"):
        entities[mention.name] = Entity(kept.name, mention.type, kept.description, True)


def _pairs(mentions: list[Mention]) -> Iterable[tuple[Mention, Mention]]:
    """Every two mentions of one sentence whose spans do not overlap, in text order."""
    ordered = sorted(mentions, key=lambda m: (m.start, m.end, m.name))
    for k, a in enumerate(ordered):
        for b in ordered[k + 1:]:
            if b.start >= a.end:
                yield a, b


def _path(a: Any, b: Any) -> tuple[list[Any], list[Any]]:
    """The dependency path between two tokens of one sentence, as its two halves: from
    each token up to their lowest common ancestor, which ends both."""
    a_chain, b_chain = [a, *a.ancestors], [b, *b.ancestors]
    on_b = [t.i for t in b_chain]
    k = next(k for k, token in enumerate(a_chain) if token.i in on_b)
    return a_chain[:k + 1], b_chain[:on_b.index(a_chain[k].i) + 1]


def _label(*halves: list[Any]) -> str | None:
    """The relation word on a dependency path (halves as ``_path`` gives them).

    Walking up a half from the mention's head, the first verb, or noun governing a
    preposition, is the label, with the preposition below it that leads to the
    head: "directed by", "story by", "brother of". Past participles keep their form
    ("born in"), other verbs and nouns give their lemma. The later mention's half is
    read first: in "X is a film directed by Y" the relation sits next to Y.
    """
    for up in halves:
        for below, token in itertools.pairwise(up):
            preposition = below.pos_ == "ADP"
            if token.pos_ == "VERB" or (token.pos_ == "NOUN" and preposition):
                word = token.lower_ if token.tag_ in ("VBN", "VBG") else token.lemma_.lower()
                return f"{word} {below.lower_}" if preposition else word
    return None


def _lifespan(doc: Any, a: Mention, b: Mention) -> str | None:
    """"born" or "died" for a date in the brackets right after a name, before or after a
    dash: "Pál Gábor (2 November 1932 – 21 October 1987)", the encyclopedic life span
    that no verb states (on 2Wiki's gold triples, relation match 0.48 → 0.61). ``a``
    precedes ``b``."""
    if b.type != "date" or a.end >= len(doc) or doc[a.end].text != "(":
        return None
    inside = doc[a.end + 1:b.start]
    closing = next((t.i for t in doc[b.end:doc[b.start].sent.end] if t.text == ")"), None)
    if closing is None or any(t.text in "()" for t in inside):
        return None
    if any(t.text in DASHES for t in inside):
        return "died"
    return "born" if any(t.text in DASHES for t in doc[b.end:closing]) else None


@dataclass(frozen=True)
class Chunk:
    """What the extractor reads of a chunk: its text and, when the unit shows it, its title."""

    chunk_id: str
    text: str
    title: str | None

    @property
    def unit(self) -> str:
        """The retrieval unit an LLM reads of the chunk: ``# <title>`` then the text, or
        the text alone (``kgrag.retrieval.units.unit_text`` renders the same for a build)."""
        return self.text if self.title is None else f"# {self.title}\n{self.text}"


class Parser:
    """The work of parsing a batch: a chunk's (text, title) to its cache payload, spaCy
    loaded on the first batch. It travels pickled, unloaded, to Ray workers
    (``kgrag.models.executor``), each of which loads its own copy once."""

    def __init__(self, pipeline: ResolvedPipeline,
                 load: Callable[[ResolvedPipeline], Any] = load_pipeline) -> None:
        self.pipeline, self._load = pipeline, load
        self._nlp: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_nlp": None}

    def __call__(self, chunks: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        if self._nlp is None:
            self._nlp = self._load(self.pipeline)
        docs = self._nlp.pipe((text for text, _ in chunks), batch_size=BATCH_SIZE)
        return [_payload(*extract_parse(doc, title)) for doc, (_, title) in zip(docs, chunks)]


class NlpExtractor:
    """Extracts chunks through the shared call cache; only unseen chunks are parsed.

    The key holds the pipeline's identity (name, version, spaCy version), the
    extractor's version, the text and the title, so a warm rerun never loads spaCy
    and a changed rule (a new ``NLP_EXTRACTOR_VERSION``) never replays stale
    results. The distinct keys go in batches of ``BATCH_SIZE``, in chunk order, through
    ``executor.map_work`` (in this process, or on Ray workers): each batch's misses are
    parsed together with ``nlp.pipe`` and stored before the batch counts as done, so a
    stopped run loses one batch per worker at most. The batches are the same wherever
    they run, so the payloads are too.
    """

    def __init__(self, pipeline: ResolvedPipeline, cache: CallCache,
                 load: Callable[[ResolvedPipeline], Any] = load_pipeline,
                 executor: Executor | None = None) -> None:
        self.pipeline, self.cache = pipeline, cache
        self.parser = Parser(pipeline, load)
        self.executor = executor or LocalExecutor()
        self.parsed = 0
        self.cache_hits = 0

    def key(self, chunk: Chunk) -> str:
        """The cache key of the chunk's extraction (its payload holds all of it)."""
        return request_key("nlp-extract", {**self.pipeline.identity(),
                                           "extractor": NLP_EXTRACTOR_VERSION,
                                           "text": chunk.text, "title": chunk.title})

    def extract(self, chunks: Sequence[Chunk], progress: Callable[[Iterable, int], Iterable]
                = lambda items, total: items) -> list[Extraction]:
        """One ``Extraction`` per chunk, in order (``stream``'s, held in a list)."""
        return list(self.stream(chunks, progress))

    def stream(self, chunks: Sequence[Chunk], progress: Callable[[Iterable, int], Iterable]
               = lambda items, total: items) -> Iterator[Extraction]:
        """Every chunk parsed or found in the cache, then its ``Extraction``, in order.

        The parses are done when this returns; ``progress`` counts the chunks as their
        batches finish. A batch's payloads are dropped once stored, and the extractions
        are read back from the cache ``STREAM_BATCH`` chunks at a time as the iterator
        is consumed, so no one holds every chunk's payload or ``Extraction`` at once
        (the cache answers the second read from the same entries, so it is the first's).
        """
        keys = [self.key(c) for c in chunks]
        first = dict(zip(keys, chunks))  # a key's chunks have one text and title
        distinct = list(first)
        batches = [distinct[k:k + BATCH_SIZE] for k in range(0, len(distinct), BATCH_SIZE)]

        def parse(work: Any, batch: list[str]) -> list[bool]:
            _, computed = self.cache.get_or_compute_many(
                batch, self.pipeline.name,
                lambda todo: work([(first[batch[i]].text, first[batch[i]].title)
                                   for i in todo]))
            return computed

        def each_chunk(batches_done: Iterable[list]) -> Iterator[None]:
            for done in batches_done:
                yield from (None for _ in done)

        results = self.executor.map_work(self.parser, parse, batches,
                                         lambda done: progress(each_chunk(done), len(distinct)))
        parsed_now = sum(sum(computed) for computed in results)
        self.parsed += parsed_now
        self.cache_hits += len(chunks) - parsed_now
        return self._read_back(chunks, keys)

    def _read_back(self, chunks: Sequence[Chunk], keys: list[str]) -> Iterator[Extraction]:
        for k in range(0, len(chunks), STREAM_BATCH):
            payloads = self.cache.stored(keys[k:k + STREAM_BATCH])
            yield from (_extraction(c.chunk_id, payload)
                        for c, payload in zip(chunks[k:k + STREAM_BATCH], payloads))


def _payload(entities: tuple[Entity, ...], relationships: tuple[Relationship, ...],
             counts: ExtractionCounts) -> dict[str, Any]:
    return {"entities": [asdict(e) for e in entities],
            "relationships": [asdict(r) for r in relationships], "counts": asdict(counts)}


def _extraction(chunk_id: str, payload: dict[str, Any]) -> Extraction:
    return Extraction(chunk_id, tuple(Entity(**e) for e in payload["entities"]),
                      tuple(Relationship(**r) for r in payload["relationships"]),
                      attempts=1, counts=ExtractionCounts(**payload["counts"]))
