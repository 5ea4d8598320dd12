"""LLM extraction of entities and relationships from chunks, GraphRAG-style.

This is the one extraction step every LLM-built graph shares (KET-RAG's skeleton,
HugRAG's hierarchy). The model fills a JSON schema per chunk: entities (name, type,
description) and relationships (source, target, description, strength 1–10).

Why the output is distrusted and filtered here: the bundled models are tiny (135M
and 270M parameters). Constrained decoding makes their output parse, but it does not
make it true: they copy the few-shot example's entities, repeat lines and invent
names. So every output is normalised, deduplicated and *grounded* (an entity is kept
only when its name occurs in the chunk), and the counts before and after each filter
are recorded, because extraction quality has to be a measured figure, not an
assumption.

Decisions, each made where the papers and GraphRAG leave room:

* Names are copied by the model as written in the text (copying is what small
  models do best, and upper-case names cost 1.6x (Gemma) to 2.2x (SmolLM2) the
  tokens) and upper-cased here, as GraphRAG does, so that "Paris", "paris" and
  "PARIS" are one node across chunks: the name is the entity's identity.
* A relationship whose endpoint is not among the chunk's entities adds that
  endpoint as an entity of type ``other`` (GraphRAG's graph extractor does the
  same); grounding then decides whether it stays. Dropping the relationship would
  throw away evidence the text supports whenever the model merely forgot to list
  the entity.
* Relationships are undirected within a chunk and across chunks: the small models
  order endpoints arbitrarily, and every consumer (PageRank, Leiden, local search)
  treats the graph as undirected. The orientation first seen is kept for display.
* A pair repeated within one chunk is one relationship (descriptions joined,
  the highest strength kept): a small model restating it is not new evidence.
  Across chunks, strength is averaged and also summed as ``weight`` (see ``merge``).
* Validation fails (and the call is retried) only when the output's *structure* is
  wrong; empty or wholly ungrounded output is a valid, measured result.
* The chunk text is put on one line in the prompt (whitespace collapsed), because
  the few-shot format is one ``Text:`` line and one ``JSON:`` line per example.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import polars as pl

from kgrag.models.llm import CachedLLM, InvalidOutput, Message

Style = Literal["completion", "chat"]

# GraphRAG's default types (organization, person, geo, event) plus the kinds that
# Wikipedia-style and biomedical text are full of; "other" absorbs the rest.
ENTITY_TYPES = ("organization", "person", "geo", "event", "work", "date", "concept",
                "biomedical", "other")
# Per-chunk caps. Measured on 8 MuSiQue paragraphs, the bundled models keep about
# 2 grounded entities and 0.5 grounded relationships per paragraph whether the caps
# are 4, 6 or 8: they fill the remaining slots by repeating their last item. Every
# slot costs tokens, so the defaults are small; a larger model on longer chunks
# should raise them (``extract``'s max_entities / max_relationships).
MAX_ENTITIES = 4
MAX_RELATIONSHIPS = 4
MAX_NAME_CHARS = 60
MAX_DESCRIPTION_CHARS = 80
# Joins the descriptions of one entity or relationship from several chunks; not a
# newline or "|", because retrieval renders descriptions in pipe-delimited rows.
DESCRIPTION_SEPARATOR = "; "


def text_field(min_chars: int, max_chars: int) -> dict[str, Any]:
    """A bounded string of plain characters, written as a pattern on purpose.

    llama-cpp-python's schema-to-grammar converter lets a ``maxLength`` string hold
    raw control characters, so a model could emit a literal newline inside a string
    and the output would not parse (seen with Gemma 270M). The pattern excludes
    control characters, quotes and backslashes, so every output is valid JSON.
    """
    return {"type": "string", "pattern": rf'^[^"\\\x00-\x1f]{{{min_chars},{max_chars}}}$'}


_NAME = text_field(1, MAX_NAME_CHARS)
_STRING = text_field(0, MAX_DESCRIPTION_CHARS)


def extraction_schema(max_entities: int = MAX_ENTITIES,
                      max_relationships: int = MAX_RELATIONSHIPS) -> dict[str, Any]:
    """The JSON schema of one chunk's output, which the grammar enforces token by token.

    The item caps bound the cost: the small models tend to repeat their last item
    until a list is full, so every slot allowed is paid for. llama.cpp's
    schema-to-grammar conversion ignores minimum/maximum, so the strength range is
    an enum: the grammar can then only emit 1..10.
    """
    return {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array", "maxItems": max_entities,
                "items": {
                    "type": "object",
                    "properties": {"name": _NAME, "type": {"enum": list(ENTITY_TYPES)},
                                   "description": _STRING},
                    "required": ["name", "type", "description"], "additionalProperties": False,
                },
            },
            "relationships": {
                "type": "array", "maxItems": max_relationships,
                "items": {
                    "type": "object",
                    "properties": {"source": _NAME, "target": _NAME, "description": _STRING,
                                   "strength": {"type": "integer", "enum": list(range(1, 11))}},
                    "required": ["source", "target", "description", "strength"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["entities", "relationships"],
        "additionalProperties": False,
    }


INSTRUCTION = (
    "Extract the named entities of the text and the relationships between them. "
    f"Entity types: {', '.join(ENTITY_TYPES)}. Copy every name exactly as it is written "
    "in the text. Describe each entity and relationship in a few words, using only "
    "facts from the text. Strength is how strongly the text links the two entities, "
    "from 1 (weak) to 10 (explicit). Answer with JSON only."
)

# Few-shot examples: short, real facts, Wikipedia-like, with every name copied from
# the text (tests check that they pass this module's own filters unchanged). They
# list more items than the default caps on purpose, to show every common type; the
# grammar closes each list at its cap (that is how the caps were measured).
EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, "
        "France. It is named after the engineer Gustave Eiffel, whose company designed "
        "and built the tower for the 1889 World's Fair."),
        {
            "entities": [
                {"name": "Eiffel Tower", "type": "geo",
                 "description": "Wrought-iron lattice tower in Paris"},
                {"name": "Champ de Mars", "type": "geo",
                 "description": "Place in Paris where the tower stands"},
                {"name": "Paris", "type": "geo", "description": "City in France"},
                {"name": "France", "type": "geo", "description": "Country of Paris"},
                {"name": "Gustave Eiffel", "type": "person",
                 "description": "Engineer whose company built the tower"},
                {"name": "1889 World's Fair", "type": "event",
                 "description": "Exhibition the tower was built for"},
            ],
            "relationships": [
                {"source": "Eiffel Tower", "target": "Champ de Mars",
                 "description": "The tower stands on the Champ de Mars", "strength": 9},
                {"source": "Champ de Mars", "target": "Paris",
                 "description": "The Champ de Mars is in Paris", "strength": 7},
                {"source": "Paris", "target": "France",
                 "description": "Paris is in France", "strength": 6},
                {"source": "Eiffel Tower", "target": "Gustave Eiffel",
                 "description": "Named after Eiffel, whose company built it", "strength": 10},
                {"source": "Eiffel Tower", "target": "1889 World's Fair",
                 "description": "Built for the 1889 World's Fair", "strength": 8},
            ],
        },
    ),
    (
        ("Penicillin was discovered in 1928 by the Scottish physician Alexander Fleming at "
        "St Mary's Hospital in London. Fleming shared the 1945 Nobel Prize in Physiology "
        "or Medicine with Howard Florey, who developed it into a medicine."),
        {
            "entities": [
                {"name": "Penicillin", "type": "biomedical",
                 "description": "Substance discovered by Fleming in 1928"},
                {"name": "1928", "type": "date",
                 "description": "Year penicillin was discovered"},
                {"name": "Alexander Fleming", "type": "person",
                 "description": "Scottish physician who discovered penicillin"},
                {"name": "St Mary's Hospital", "type": "organization",
                 "description": "Hospital in London"},
                {"name": "London", "type": "geo", "description": "City of St Mary's Hospital"},
                {"name": "Nobel Prize in Physiology or Medicine", "type": "other",
                 "description": "Prize Fleming and Florey shared in 1945"},
                {"name": "Howard Florey", "type": "person",
                 "description": "Developed penicillin into a medicine"},
            ],
            "relationships": [
                {"source": "Alexander Fleming", "target": "Penicillin",
                 "description": "Fleming discovered penicillin", "strength": 10},
                {"source": "Penicillin", "target": "1928",
                 "description": "Penicillin was discovered in 1928", "strength": 7},
                {"source": "Alexander Fleming", "target": "St Mary's Hospital",
                 "description": "Fleming made the discovery at St Mary's", "strength": 6},
                {"source": "St Mary's Hospital", "target": "London",
                 "description": "The hospital is in London", "strength": 7},
                {"source": "Howard Florey", "target": "Penicillin",
                 "description": "Florey developed penicillin into a medicine", "strength": 8},
                {"source": "Alexander Fleming", "target": "Nobel Prize in Physiology or Medicine",
                 "description": "Fleming shared the 1945 prize", "strength": 8},
                {"source": "Howard Florey", "target": "Nobel Prize in Physiology or Medicine",
                 "description": "Florey shared the 1945 prize", "strength": 8},
            ],
        },
    ),
)


def _render(value: dict[str, Any]) -> str:
    """Compact JSON, the exact shape the grammar produces, so examples cost few tokens."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def completion_prompt(text: str) -> str:
    """The few-shot prompt as plain text, for base models without a chat template.

    It ends right where the JSON should start, so the grammar-constrained
    continuation is the answer.
    """
    shots = "".join(f"Text: {t}\nJSON: {_render(out)}\n\n" for t, out in EXAMPLES)
    return f"{INSTRUCTION}\n\n{shots}Text: {_clean(text)}\nJSON: "


def chat_messages(text: str) -> list[Message]:
    """The few-shot prompt as chat turns, for instruction-tuned models."""
    messages: list[Message] = [{"role": "system", "content": INSTRUCTION}]
    for example_text, out in EXAMPLES:
        messages.append({"role": "user", "content": f"Text: {example_text}"})
        messages.append({"role": "assistant", "content": _render(out)})
    messages.append({"role": "user", "content": f"Text: {_clean(text)}"})
    return messages


@dataclass(frozen=True)
class Entity:
    """One entity of one chunk; ``name`` is normalised (see ``normalise_name``)."""

    name: str
    type: str
    description: str
    grounded: bool


@dataclass(frozen=True)
class Relationship:
    """One undirected relationship of one chunk between two of its entities."""

    source: str
    target: str
    description: str
    strength: int
    grounded: bool


@dataclass(frozen=True)
class ExtractionCounts:
    """What each filter removed or added, per chunk, so quality can be measured.

    ``*_raw`` are the model's items as emitted; ``*_empty`` / ``relationships_invalid``
    lost a name or were self-loops; ``*_duplicate`` repeated a kept item;
    ``entities_implied`` were added as relationship endpoints; ``*_ungrounded`` failed
    grounding (counted whether or not they were kept).
    """

    entities_raw: int = 0
    relationships_raw: int = 0
    entities_empty: int = 0
    relationships_invalid: int = 0
    entities_duplicate: int = 0
    relationships_duplicate: int = 0
    entities_implied: int = 0
    entities_ungrounded: int = 0
    relationships_ungrounded: int = 0


@dataclass(frozen=True)
class Extraction:
    """The result for one chunk. A failed extraction carries ``error`` and no items,
    so a build goes on and its manifest can list the chunk as failed."""

    chunk_id: str
    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    attempts: int
    counts: ExtractionCounts = field(default_factory=ExtractionCounts)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def max_output_tokens(max_entities: int = MAX_ENTITIES,
                      max_relationships: int = MAX_RELATIONSHIPS) -> int:
    """A ``max_tokens`` that a schema-bounded output cannot reach.

    At the length limits an entity is at most 39 tokens and a relationship 54 with
    either bundled tokenizer (plain English); half as much again covers denser
    text. An output cut off by ``max_tokens`` could not parse, so this must not bind.
    """
    return 16 + 60 * max_entities + 80 * max_relationships


def extract(llm: CachedLLM, chunk_id: str, text: str, *, style: Style = "completion",
            max_tokens: int | None = None, max_entities: int = MAX_ENTITIES,
            max_relationships: int = MAX_RELATIONSHIPS,
            keep_ungrounded: bool = False) -> Extraction:
    """Extract one chunk's entities and relationships; never raises on bad model output.

    ``style="completion"`` suits base models (the bundled Gemma has no chat
    template and echoes chat prompts); ``"chat"`` suits instruction-tuned ones.
    Each output is checked inside ``CachedLLM``'s retry loop, so a structurally
    invalid answer is retried and cached as invalid. When every attempt fails the
    result is a failed ``Extraction``. ``keep_ungrounded`` keeps items whose names do
    not occur in the text (flagged ``grounded=False``) instead of dropping them; it
    only changes the filtering, so both settings replay the same cached calls.
    ``max_tokens`` defaults to ``max_output_tokens`` of the caps.
    """
    if style not in ("completion", "chat"):
        raise ValueError(f"unknown extraction style {style!r}: use 'completion' or 'chat'")
    schema = extraction_schema(max_entities, max_relationships)
    if max_tokens is None:
        max_tokens = max_output_tokens(max_entities, max_relationships)

    def validate(obj: Any) -> tuple[tuple[Entity, ...], tuple[Relationship, ...],
                                    ExtractionCounts]:
        return _filter(obj, text, keep_ungrounded)

    try:
        if style == "completion":
            result, attempts = llm.complete_json(completion_prompt(text), schema,
                                                 max_tokens=max_tokens, validate=validate)
        else:
            result, attempts = llm.chat_json(chat_messages(text), schema,
                                             max_tokens=max_tokens, validate=validate)
    except InvalidOutput as exc:
        return Extraction(chunk_id, (), (), attempts=len(exc.errors), error=str(exc))
    entities, relationships, counts = result
    return Extraction(chunk_id, entities, relationships, attempts, counts)


def normalise_name(name: str) -> str:
    """The identity of an entity: NFKC, no surrounding quotes or spaces, single spaces,
    upper case (GraphRAG's convention, so case variants merge into one node)."""
    return _clean(name).strip("\"'`").strip().upper()


def is_grounded(name: str, text: str) -> bool:
    """Whether ``name`` occurs in ``text`` as whole words, ignoring case and spacing.

    Whole words, so that a short name such as "AN" is not grounded by "Andaman".
    """
    needle = _clean(name).casefold()
    if not needle:
        return False
    pattern = rf"(?<!\w){re.escape(needle)}(?!\w)"
    return re.search(pattern, _clean(text).casefold()) is not None


def _clean(text: str) -> str:
    """NFKC and single spaces: the model may re-space or re-encode what it copies."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _field(item: Any, key: str, kind: type) -> Any:
    """One field of one output item, with an error that says which and why."""
    if not isinstance(item, dict):
        raise TypeError(f"expected an object, got {type(item).__name__}")
    value = item[key]
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{key} must be a number, got {value!r}")
        return round(value)
    if not isinstance(value, kind):
        raise TypeError(f"{key} must be a {kind.__name__}, got {value!r}")
    return value


def _items(obj: Any, key: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
    value = obj[key]
    if not isinstance(value, list):
        raise TypeError(f"{key} must be a list, got {type(value).__name__}")
    return value


def _filter(obj: Any, text: str, keep_ungrounded: bool
            ) -> tuple[tuple[Entity, ...], tuple[Relationship, ...], ExtractionCounts]:
    """Parse one output, then normalise, deduplicate, complete and ground it.

    Raises ``TypeError``/``KeyError`` only for a wrong structure, which makes
    ``CachedLLM`` retry; every other flaw is repaired or counted.
    """
    raw_entities, raw_relationships = _items(obj, "entities"), _items(obj, "relationships")
    counts: Counter[str] = Counter()
    entities: dict[str, Entity] = {}
    for item in raw_entities:
        name = normalise_name(_field(item, "name", str))
        kind = _field(item, "type", str).strip().lower()
        description = _clean(_field(item, "description", str))
        if not name:
            counts["entities_empty"] += 1
        elif name in entities:
            counts["entities_duplicate"] += 1
            entities[name] = _merge_entity(entities[name], kind, description)
        else:
            entities[name] = Entity(name, kind if kind in ENTITY_TYPES else "other",
                                    description, grounded=False)

    relationships: dict[frozenset[str], Relationship] = {}
    for item in raw_relationships:
        source = normalise_name(_field(item, "source", str))
        target = normalise_name(_field(item, "target", str))
        description = _clean(_field(item, "description", str))
        strength = min(10, max(1, _field(item, "strength", int)))
        if not source or not target or source == target:
            counts["relationships_invalid"] += 1
        else:
            add_relationship(relationships,
                             Relationship(source, target, description, strength, False), counts)

    for relationship in relationships.values():
        for endpoint in (relationship.source, relationship.target):
            if endpoint not in entities:
                counts["entities_implied"] += 1
                entities[endpoint] = Entity(endpoint, "other", "", grounded=False)

    grounded = {name: is_grounded(name, text) for name in entities}
    kept_entities = tuple(replace(e, grounded=grounded[e.name]) for e in entities.values())
    kept_relationships = tuple(
        replace(r, grounded=grounded[r.source] and grounded[r.target])
        for r in relationships.values())
    counts["entities_ungrounded"] = sum(not e.grounded for e in kept_entities)
    counts["relationships_ungrounded"] = sum(not r.grounded for r in kept_relationships)
    if not keep_ungrounded:
        kept_entities = tuple(e for e in kept_entities if e.grounded)
        kept_relationships = tuple(r for r in kept_relationships if r.grounded)
    return kept_entities, kept_relationships, ExtractionCounts(
        entities_raw=len(raw_entities), relationships_raw=len(raw_relationships), **counts)


def _merge_entity(kept: Entity, kind: str, description: str) -> Entity:
    """A repeated entity within one chunk: a specific type replaces ``other``, and a
    new description is appended."""
    if kept.type == "other" and kind in ENTITY_TYPES:
        kept = replace(kept, type=kind)
    return replace(kept, description=join_descriptions([kept.description, description]))


def add_relationship(relationships: dict[frozenset[str], Relationship],
                     relationship: Relationship, counts: Counter[str]) -> None:
    """One relationship per pair of entities within a chunk, either direction: a pair
    stated again is counted as a duplicate, its descriptions joined and the higher
    strength kept (a restatement is not new evidence)."""
    key = frozenset((relationship.source, relationship.target))
    kept = relationships.get(key)
    if kept is None:
        relationships[key] = relationship
        return
    counts["relationships_duplicate"] += 1
    relationships[key] = replace(
        kept, description=join_descriptions([kept.description, relationship.description]),
        strength=max(kept.strength, relationship.strength))


def join_descriptions(descriptions: Iterable[str]) -> str:
    """Distinct non-empty descriptions in first-seen order, joined. Already joined
    ones are split first, so merging chunks cannot repeat a description."""
    parts = (p for d in descriptions for p in d.split(DESCRIPTION_SEPARATOR) if p)
    return DESCRIPTION_SEPARATOR.join(dict.fromkeys(parts))


def counts_frame(extractions: Iterable[Extraction]) -> pl.DataFrame:
    """One row per chunk: attempts, error, items kept and every filter's counts, so that
    extraction quality can be measured after the fact (``kgrag.eval.builds``)."""
    return pl.DataFrame(
        [{"chunk_id": x.chunk_id, "attempts": x.attempts, "error": x.error,
          "entities": len(x.entities), "relationships": len(x.relationships),
          **asdict(x.counts)} for x in extractions],
        schema_overrides={"error": pl.String})


ENTITY_FRAME_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String(),
    "type": pl.String(),
    "description": pl.String(),
    "source_chunk_ids": pl.List(pl.String()),
    "grounded": pl.Boolean(),
}
RELATIONSHIP_FRAME_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "target": pl.String(),
    "description": pl.String(),
    "strength": pl.Float64(),
    "weight": pl.Int64(),
    "source_chunk_ids": pl.List(pl.String()),
    "grounded": pl.Boolean(),
}


def merge(extractions: Iterable[Extraction]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Merge per-chunk extractions into one entity table and one relationship table.

    Entities merge by normalised name: the type is the most frequent one over the
    chunks (``other`` only when nothing more specific was given; ties go to the
    type seen first), descriptions are joined distinct and in order. Relationships
    merge by their unordered endpoint pair: ``strength`` is the mean over chunks
    (it stays on the 1–10 scale) and ``weight`` the sum (GraphRAG's edge weight,
    which grows with the evidence). ``grounded`` is true when the item was grounded
    in at least one chunk. Failed extractions are skipped. Chunks are read in
    ``chunk_id`` order and rows sorted by name, so the tables do not depend on the
    order extractions arrive in.
    """
    ordered = sorted((x for x in extractions if not x.failed), key=lambda x: x.chunk_id)
    entities: dict[str, list[tuple[str, Entity]]] = {}
    relationships: dict[frozenset[str], list[tuple[str, Relationship]]] = {}
    for extraction in ordered:
        for entity in extraction.entities:
            entities.setdefault(entity.name, []).append((extraction.chunk_id, entity))
        for rel in extraction.relationships:
            key = frozenset((rel.source, rel.target))
            relationships.setdefault(key, []).append((extraction.chunk_id, rel))

    entity_rows = []
    for name, seen in sorted(entities.items()):
        types = Counter(e.type for _, e in seen if e.type != "other")
        entity_rows.append({
            "name": name,
            "type": types.most_common(1)[0][0] if types else "other",
            "description": join_descriptions(e.description for _, e in seen),
            "source_chunk_ids": list(dict.fromkeys(chunk for chunk, _ in seen)),
            "grounded": any(e.grounded for _, e in seen),
        })
    relationship_rows = []
    for seen in relationships.values():
        first = seen[0][1]
        strengths = [r.strength for _, r in seen]
        relationship_rows.append({
            "source": first.source,
            "target": first.target,
            "description": join_descriptions(r.description for _, r in seen),
            "strength": sum(strengths) / len(strengths),
            "weight": sum(strengths),
            "source_chunk_ids": list(dict.fromkeys(chunk for chunk, _ in seen)),
            "grounded": any(r.grounded for _, r in seen),
        })
    relationship_rows.sort(key=lambda row: (row["source"], row["target"]))
    return (pl.DataFrame(entity_rows, schema=ENTITY_FRAME_SCHEMA),
            pl.DataFrame(relationship_rows, schema=RELATIONSHIP_FRAME_SCHEMA))
