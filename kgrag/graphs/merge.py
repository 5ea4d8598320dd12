"""The one entity–relationship merge: per-chunk extractions into entity and relationship
tables, and canonicalisation's merged groups back into tables of the same shape.

Both callers hand over *members*: rows of the entity or relationship table's
schema, each observed in one or more chunks. Extraction's members are the items of
single chunks; canonicalisation's are already merged rows whose names it found to
be one entity. The rules are the same for both:

* An entity's type is the most frequent one over its members other than ``other``
  (``other`` only when nothing more specific was given; ties go to the member that
  comes first), descriptions are joined distinct and in member order, source chunks
  pooled distinct in the same order, and it is grounded when any member is.
* Relationships are undirected: members over the same unordered pair merge, and the
  merged row keeps the orientation of its first member. ``strength`` is the mean
  over the chunks that observed the pair (a member counts as many times as it has
  source chunks, so it stays on the 1–10 scale however the rows were merged before)
  and ``weight`` the sum (GraphRAG's edge weight, which grows with the evidence).
  A relationship of an entity with itself is dropped.
* Rows come out sorted: entities by name, relationships by (source, target).

Within one chunk the extractors merge repeats first (``add_relationship``): a pair
stated again is one relationship, its descriptions joined and the higher strength
kept, because a model restating a fact is not new evidence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from kgrag.graphs.elements import Extraction, Relationship

# Joins the descriptions of one entity or relationship from several chunks; not a
# newline or "|", because retrieval renders descriptions in pipe-delimited rows.
DESCRIPTION_SEPARATOR = "; "

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

Row = Mapping[str, Any]


def join_descriptions(descriptions: Iterable[str]) -> str:
    """Distinct non-empty descriptions in first-seen order, joined. Already joined
    ones are split first, so merging chunks cannot repeat a description."""
    parts = (p for d in descriptions for p in d.split(DESCRIPTION_SEPARATOR) if p)
    return DESCRIPTION_SEPARATOR.join(dict.fromkeys(parts))


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


def merge(extractions: Iterable[Extraction]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Merge per-chunk extractions into one entity table and one relationship table.

    Entities merge by normalised name, relationships by their unordered endpoint
    pair, by the rules of the module docstring. Failed extractions are skipped.
    Chunks are read in ``chunk_id`` order, so the tables do not depend on the order
    extractions arrive in.
    """
    ordered = sorted((x for x in extractions if not x.failed), key=lambda x: x.chunk_id)
    entities: dict[str, list[Row]] = {}
    relationships: list[Row] = []
    for extraction in ordered:
        chunk = [extraction.chunk_id]
        for e in extraction.entities:
            entities.setdefault(e.name, []).append(
                {"type": e.type, "description": e.description, "source_chunk_ids": chunk,
                 "grounded": e.grounded})
        relationships += [
            {"source": r.source, "target": r.target, "description": r.description,
             "strength": r.strength, "weight": r.strength, "source_chunk_ids": chunk,
             "grounded": r.grounded} for r in extraction.relationships]
    return merge_entities(entities), merge_relationships(relationships)


def merge_entities(groups: Mapping[str, Sequence[Row]]) -> pl.DataFrame:
    """The entity table of ``name → members`` (members in the order that breaks ties)."""
    rows = []
    for name in sorted(groups):
        members = groups[name]
        types = Counter(m["type"] for m in members if m["type"] != "other")
        rows.append({
            "name": name,
            "type": types.most_common(1)[0][0] if types else "other",
            "description": join_descriptions(m["description"] for m in members),
            "source_chunk_ids": _pooled(members),
            "grounded": any(m["grounded"] for m in members),
        })
    return pl.DataFrame(rows, schema=ENTITY_FRAME_SCHEMA)


def merge_relationships(members: Iterable[Row]) -> pl.DataFrame:
    """The relationship table of ``members``, merged by unordered pair in the order given."""
    pairs: dict[frozenset[str], list[Row]] = {}
    for member in members:
        if member["source"] != member["target"]:
            pairs.setdefault(frozenset((member["source"], member["target"])), []).append(member)
    rows = []
    for seen in pairs.values():
        chunks = [max(1, len(m["source_chunk_ids"])) for m in seen]
        rows.append({
            "source": seen[0]["source"],
            "target": seen[0]["target"],
            "description": join_descriptions(m["description"] for m in seen),
            "strength": sum(float(m["strength"]) * c for m, c in zip(seen, chunks)) / sum(chunks),
            "weight": sum(int(m["weight"]) for m in seen),
            "source_chunk_ids": _pooled(seen),
            "grounded": any(m["grounded"] for m in seen),
        })
    rows.sort(key=lambda row: (row["source"], row["target"]))
    return pl.DataFrame(rows, schema=RELATIONSHIP_FRAME_SCHEMA)


def _pooled(members: Sequence[Row]) -> list[str]:
    """The members' source chunks, distinct, in member order."""
    return list(dict.fromkeys(c for m in members for c in m["source_chunk_ids"]))
