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

Why columns rather than a Python object per member, and why on disk: at scale the merge
held most of a build's memory (about 44 KB a chunk beside the extractions, then 25 KB
with every member in memory as columns, docs/scale.md). So ``merge`` reads the
extractions ``MERGE_BATCH`` at a time into member frames (polars columns, a batch's
repeated strings stored once) and spills them to Parquet files in parts by name range
(``kgrag.graphs.spill``); each part is merged in turn and written, and the rules run as
polars group-bys over sub-parts of about ``PART_ROWS`` members, every group within one.
Polars keeps rows in order within a group, so each part is sorted into member order
first and every first-seen rule reads it as the plain loops did; a strength is summed
left to right as Python's ``sum`` does, so the tables keep their values.
"""

from __future__ import annotations

import collections
import itertools
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.graphs.elements import Extraction, Relationship
from kgrag.graphs.spill import Appender, RangeSpill, bounds_of

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

# The members of one batch of extractions, each with its chunk (``merge``)
ENTITY_MEMBER_SCHEMA: dict[str, pl.DataType] = {
    "chunk_id": pl.String(), "name": pl.String(), "type": pl.String(),
    "description": pl.String(), "grounded": pl.Boolean()}
RELATIONSHIP_MEMBER_SCHEMA: dict[str, pl.DataType] = {
    "chunk_id": pl.String(), "source": pl.String(), "target": pl.String(),
    "description": pl.String(), "strength": pl.Int64(), "grounded": pl.Boolean()}
# ``merge_to``'s spilled members: their columns, with the arrival order (``seq``) and,
# for a relationship, the lesser name of its pair (``low``)
ENTITY_SPILL_SCHEMA = {**ENTITY_MEMBER_SCHEMA, "seq": pl.UInt64()}
RELATIONSHIP_SPILL_SCHEMA = {**RELATIONSHIP_MEMBER_SCHEMA, "seq": pl.UInt64(), "low": pl.String()}
MERGE_BATCH = 1000  # extractions reduced to member frames at a time
SAMPLE_BATCHES = 2  # member batches whose names cut the spilled parts' ranges
SPILL_ROWS = 125_000  # members a spilled part holds, about (``merge_to``)
PART_ROWS = 50_000  # members grouped at a time within a spilled part (``_by_part``)

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


@dataclass(frozen=True)
class MergeFiles:
    """Where ``merge_to`` writes: the entity and relationship tables and, where set, every
    member in arrival order (entities', relationships'), which the next build reuses."""

    entities: Path
    relationships: Path
    members: tuple[Path, Path] | None = None


def merge(extractions: Iterable[Extraction],
          each_batch: Callable[[Sequence[Extraction]], None] = lambda batch: None,
          chunks: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Merge per-chunk extractions into one entity table and one relationship table.

    Entities merge by normalised name, relationships by their unordered endpoint
    pair, by the rules of the module docstring. Failed extractions are skipped.
    Chunks are read in ``chunk_id`` order, so the tables do not depend on the order
    extractions arrive in. ``extractions`` is read ``MERGE_BATCH`` at a time, each
    batch seen by ``each_batch`` (the extract step records its counts) and then
    reduced to member frames, so an iterator of extractions is never held whole; the
    members wait on disk (``merge_to``, sized for about ``chunks`` chunks), and only the
    tables are held, once merged.
    """
    with tempfile.TemporaryDirectory(prefix="kgrag-merge-") as scratch:
        files = MergeFiles(Path(scratch) / "entities.parquet",
                           Path(scratch) / "relationships.parquet")
        merge_to(member_batches(extractions, each_batch), chunks, Path(scratch) / "spill", files)
        return pl.read_parquet(files.entities), pl.read_parquet(files.relationships)


def member_batches(extractions: Iterable[Extraction],
                   each_batch: Callable[[Sequence[Extraction]], None] = lambda batch: None
                   ) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """The extractions' entity and relationship members (``member_frames``), a pair of
    frames per ``MERGE_BATCH`` extractions read, each batch seen by ``each_batch`` first."""
    arriving = iter(extractions)
    for batch in iter(lambda: list(itertools.islice(arriving, MERGE_BATCH)), []):
        each_batch(batch)
        yield member_frames(batch)


def merge_to(batches: Iterable[tuple[pl.DataFrame, pl.DataFrame]], chunks: int,
             scratch: Path, files: MergeFiles) -> tuple[int, int]:
    """``merge`` of member frames (``member_frames``' pairs, in arrival order, every
    chunk's members in one pair) into ``files``; the entities and relationships written.

    The members are spilled to ``scratch`` as they arrive, in parts by range
    (``kgrag.graphs.spill``): entities by name, relationships by the lesser of their two
    names, each part of about ``SPILL_ROWS`` members at the rate of the first
    ``SAMPLE_BATCHES`` batches over ``chunks`` chunks, its ranges cut at that sample's
    names. Each part is merged in turn and written: the entities in name order as they
    come; the relationships, whose order is by their first member's orientation, spilled
    once more by ``source`` and each range sorted. What memory holds is a batch, a part
    and its merge, whatever the corpus; ``scratch`` is removed after."""
    arriving = iter(batches)
    sample = collections.deque(itertools.islice(arriving, SAMPLE_BATCHES))
    entity_sample = pl.concat([e for e, _ in sample]) if sample else pl.DataFrame(
        schema=ENTITY_MEMBER_SCHEMA)
    relationship_sample = _low(pl.concat([r for _, r in sample]) if sample else pl.DataFrame(
        schema=RELATIONSHIP_MEMBER_SCHEMA))
    seen = pl.concat([entity_sample["chunk_id"], relationship_sample["chunk_id"]]).n_unique()
    by_name = RangeSpill(scratch / "entities", ENTITY_SPILL_SCHEMA, "name", bounds_of(
        entity_sample["name"], _parts(entity_sample.height, seen, chunks)))
    pairs = bounds_of(relationship_sample["low"],
                      _parts(relationship_sample.height, seen, chunks))
    by_pair = RangeSpill(scratch / "relationships", RELATIONSHIP_SPILL_SCHEMA, "low", pairs)
    del entity_sample, relationship_sample
    members = None if files.members is None else (
        Appender(files.members[0], ENTITY_MEMBER_SCHEMA),
        Appender(files.members[1], RELATIONSHIP_MEMBER_SCHEMA))
    arrived = [0, 0]  # each kind's members so far: the next member's ``seq``
    # the sample's batches leave it as they are spilled: what is held is one batch
    leaving = (sample.popleft() for _ in range(len(sample)))
    for entities, relationships in itertools.chain(leaving, arriving):
        if members is not None:
            members[0].write(entities)
            members[1].write(relationships)
        by_name.add(_numbered(entities, arrived[0]))
        by_pair.add(_low(_numbered(relationships, arrived[1])))
        arrived[0] += entities.height
        arrived[1] += relationships.height
    if members is not None:
        members[0].close()
        members[1].close()
    in_chunk_order = ["chunk_id", "seq"]  # chunk order, then arrival (within a chunk, the
    # extractor's): the order a stable sort of the extractions by chunk gives
    entity_table = Appender(files.entities, ENTITY_FRAME_SCHEMA)
    for part in by_name.parts():
        entity_table.write(_merged_entities(_entity_parts(
            part.with_columns(source_chunk_ids=pl.concat_list("chunk_id")), in_chunk_order)))
    entity_table.close()
    by_source = RangeSpill(scratch / "merged", RELATIONSHIP_FRAME_SCHEMA, "source", pairs)
    for part in by_pair.parts():
        by_source.add(_merged_relationships(_relationship_parts(part.with_columns(
            weight=pl.col("strength"), source_chunk_ids=pl.concat_list("chunk_id")),
            in_chunk_order)))
    relationship_table = Appender(files.relationships, RELATIONSHIP_FRAME_SCHEMA)
    for part in by_source.parts():
        relationship_table.write(part.sort("source", "target"))
    relationship_table.close()
    shutil.rmtree(scratch)
    return entity_table.rows, relationship_table.rows


def _parts(rows: int, chunks_seen: int, chunks: int) -> int:
    """How many spilled parts hold about ``SPILL_ROWS`` members each, at the sample's
    ``rows`` over ``chunks_seen`` chunks, for ``chunks`` chunks (at least the sample's)."""
    expected = max(rows, rows * chunks // max(chunks_seen, 1))
    return max(1, -(-expected // SPILL_ROWS))


def _numbered(members: pl.DataFrame, first: int) -> pl.DataFrame:
    """``members`` numbered in arrival order from ``first`` (``seq``; 64 bits, as a
    corpus of 100M chunks has more members than 32 bits count)."""
    return members.with_columns(seq=pl.int_range(first, first + members.height,
                                                 dtype=pl.UInt64))


def _low(relationships: pl.DataFrame) -> pl.DataFrame:
    """Relationship members less self-loops, with the lesser of their names (``low``):
    what a pair's members share, whichever way round each is."""
    source, target = pl.col("source"), pl.col("target")
    return relationships.filter(source != target).with_columns(
        low=pl.when(source <= target).then(source).otherwise(target))


def member_frames(extractions: Sequence[Extraction]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per entity and per relationship of the extractions, in their order,
    each with its chunk: a batch's items as columns rather than Python objects (failed
    extractions have none)."""
    extractions = [x for x in extractions if not x.failed]
    entities = [(x.chunk_id, e) for x in extractions for e in x.entities]
    relationships = [(x.chunk_id, r) for x in extractions for r in x.relationships]
    return (pl.DataFrame([
        _interned([c for c, _ in entities]), _interned([e.name for _, e in entities]),
        _interned([e.type for _, e in entities]),
        _interned([e.description for _, e in entities]),
        pl.Series([e.grounded for _, e in entities], dtype=pl.Boolean)],
        schema=ENTITY_MEMBER_SCHEMA),
        pl.DataFrame([
            _interned([c for c, _ in relationships]),
            _interned([r.source for _, r in relationships]),
            _interned([r.target for _, r in relationships]),
            _interned([r.description for _, r in relationships]),
            pl.Series([r.strength for _, r in relationships], dtype=pl.Int64),
            pl.Series([r.grounded for _, r in relationships], dtype=pl.Boolean)],
            schema=RELATIONSHIP_MEMBER_SCHEMA))


def _interned(values: list[str]) -> pl.Series:
    """``values`` with each distinct string's bytes stored once: a chunk's relationships
    repeat its sentences, and its members its id. The distinct strings are gathered,
    and a gathered string is a view into the bytes it was gathered from."""
    first: dict[str, int] = {}
    positions = [first.setdefault(value, len(first)) for value in values]
    return pl.Series(list(first), dtype=pl.String).gather(positions)


def merge_entities(groups: Mapping[str, Sequence[Row]]) -> pl.DataFrame:
    """The entity table of ``name → members`` (members in the order that breaks ties)."""
    return _merged_entities(_entity_parts(pl.DataFrame(
        [{**member, "name": name} for name, members in groups.items() for member in members],
        schema=ENTITY_FRAME_SCHEMA).with_row_index("seq"), ["seq"]))


def merge_relationships(members: Iterable[Row]) -> pl.DataFrame:
    """The relationship table of ``members``, merged by unordered pair in the order given."""
    return _merged_relationships(_relationship_parts(pl.DataFrame(
        list(members), schema=RELATIONSHIP_FRAME_SCHEMA).with_row_index("seq"), ["seq"]))


def _entity_parts(members: pl.DataFrame, order: list[str]) -> pl.DataFrame:
    """Member rows (``ENTITY_FRAME_SCHEMA``'s columns, and the ``order`` columns that sort
    them into the order that breaks ties) in parts by name (``_in_parts``)."""
    return _in_parts(members, pl.col("name").hash(), order)


def _relationship_parts(members: pl.DataFrame, order: list[str]) -> pl.DataFrame:
    """Member rows (``RELATIONSHIP_FRAME_SCHEMA``'s columns, and the ``order`` columns)
    less self-loops, in parts by unordered pair (``_in_parts``)."""
    pair = pl.min_horizontal(pl.col("source").hash(), pl.col("target").hash())
    return _in_parts(members.filter(pl.col("source") != pl.col("target")), pair, order)


def _in_parts(members: pl.DataFrame, key: pl.Expr, order: list[str]) -> pl.DataFrame:
    """The members sorted into parts of about ``PART_ROWS`` rows (column ``part``), each
    part's rows in ``order``; ``key`` is equal over a group, so no group spans two parts.
    A group-by's working memory is a few times its input's: merged a part at a time,
    what the parts hold together is the merged rows."""
    parts = max(1, -(-members.height // PART_ROWS))
    return members.with_columns(part=key % parts).sort(["part", *order])


def _merged_entities(parted: pl.DataFrame) -> pl.DataFrame:
    """The entity table of members in parts (``_entity_parts``)."""
    merged = _by_part(parted, _entity_groups)
    return merged.sort("name").select(list(ENTITY_FRAME_SCHEMA)).cast(pl.Schema(ENTITY_FRAME_SCHEMA))


def _merged_relationships(parted: pl.DataFrame) -> pl.DataFrame:
    """The relationship table of members in parts (``_relationship_parts``)."""
    return (_by_part(parted, _relationship_groups).sort("source", "target")
            .select(list(RELATIONSHIP_FRAME_SCHEMA)).cast(pl.Schema(RELATIONSHIP_FRAME_SCHEMA)))


def _by_part(parted: pl.DataFrame, merge_part: Callable[[pl.DataFrame], pl.DataFrame]
             ) -> pl.DataFrame:
    """``merge_part`` on each part of ``parted`` (``_in_parts``), the results together."""
    merged, start = [], 0
    for rows in parted.get_column("part").unique_counts():
        merged.append(merge_part(parted.slice(start, rows)))
        start += rows
    return pl.concat(merged) if merged else merge_part(parted)


def _entity_groups(members: pl.DataFrame) -> pl.DataFrame:
    """Entity rows of members sorted in tie order, grouped by name. Polars keeps the rows'
    order within a group, which is the member order every rule reads."""
    members = members.with_row_index("order")
    # Counter.most_common's tie rule: the type seen first among the most frequent
    types = (members.filter(pl.col("type") != "other")
             .group_by("name", "type").agg(pl.len().alias("seen"), pl.col("order").min())
             .sort(["name", "seen", "order"], descending=[False, True, False])
             .group_by("name", maintain_order=True).agg(pl.col("type").first()))
    merged = members.group_by("name").agg(_descriptions(), _pooled(),
                                         pl.col("grounded").any())
    return (merged.join(types, on="name", how="left")
            .with_columns(pl.col("type").fill_null("other"), _joined()))


def _relationship_groups(members: pl.DataFrame) -> pl.DataFrame:
    """Relationship rows of members sorted in tie order, grouped by unordered pair."""
    source, target = pl.col("source"), pl.col("target")
    chunks = pl.col("source_chunk_ids").list.len().clip(lower_bound=1)
    return (members
            .with_columns(low=pl.when(source <= target).then(source).otherwise(target),
                          high=pl.when(source <= target).then(target).otherwise(source))
            .group_by("low", "high").agg(
                source.first(), target.first(), _descriptions(),
                # summed left to right (a running sum), as Python's sum adds floats
                strength=(pl.col("strength").cast(pl.Float64) * chunks).cum_sum().last()
                / chunks.sum(),
                weight=pl.col("weight").sum(), source_chunk_ids=_pooled(),
                grounded=pl.col("grounded").any())
            .with_columns(_joined()))


def _descriptions() -> pl.Expr:
    """A group's description parts, distinct, in member order (``join_descriptions``)."""
    return (pl.col("description").str.split(DESCRIPTION_SEPARATOR).explode()
            .unique(maintain_order=True))


def _joined() -> pl.Expr:
    """The parts of ``_descriptions``, empty ones left out, joined."""
    return (pl.col("description").list.filter(pl.element() != "")
            .list.join(DESCRIPTION_SEPARATOR))


def _pooled() -> pl.Expr:
    """A group's source chunks, distinct, in member order."""
    return pl.col("source_chunk_ids").explode().drop_nulls().unique(maintain_order=True)
