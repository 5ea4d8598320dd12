"""LLM extraction of entities and relationships from chunks, GraphRAG-style: one
constrained call per chunk (``kgrag.graphs.extraction.prompt``), its output parsed and
grounded here.

This is the one extraction step every LLM-built graph shares (KET-RAG's skeleton,
HugRAG's hierarchy); ``kgrag.graphs.merge`` turns its per-chunk results into tables.

Why the output is distrusted and filtered here: the bundled models are tiny (135M
and 270M parameters). Constrained decoding makes their output parse, but it does not
make it true: they copy the few-shot example's entities, repeat lines and invent
names. So every output is normalised, deduplicated and *grounded* (an entity is kept
only when its name occurs in the chunk), and the counts before and after each filter
are recorded, because extraction quality has to be a measured figure, not an
assumption.

Decisions, each made where the papers and GraphRAG leave room:

* Names are upper-cased here (``normalise_name``), as GraphRAG does, so that
  "Paris", "paris" and "PARIS" are one node across chunks: the name is the entity's
  identity.
* A relationship whose endpoint is not among the chunk's entities adds that
  endpoint as an entity of type ``other`` (GraphRAG's graph extractor does the
  same); grounding then decides whether it stays. Dropping the relationship would
  throw away evidence the text supports whenever the model merely forgot to list
  the entity.
* Relationships are undirected within a chunk and across chunks: the small models
  order endpoints arbitrarily, and every consumer (PageRank, Leiden, local search)
  treats the graph as undirected. The orientation first seen is kept for display.
* A pair repeated within one chunk is one relationship (``add_relationship``); an
  entity repeated within one chunk keeps its first type unless that is ``other``,
  and gains the new description.
* Validation fails (and the call is retried) only when the output's *structure* is
  wrong; empty or wholly ungrounded output is a valid, measured result.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from kgrag.graphs.elements import Entity, Extraction, ExtractionCounts, Relationship
from kgrag.graphs.extraction.prompt import (
    ENTITY_TYPES,
    MAX_ENTITIES,
    MAX_RELATIONSHIPS,
    Style,
    chat_messages,
    completion_prompt,
    extraction_schema,
    max_output_tokens,
)
from kgrag.graphs.merge import add_relationship, join_descriptions
from kgrag.graphs.names import clean, is_grounded, normalise_name
from kgrag.models.llm import CachedLLM, InvalidOutput


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
        description = clean(_field(item, "description", str))
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
        description = clean(_field(item, "description", str))
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

