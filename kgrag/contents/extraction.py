"""The ``extract`` artefact: what extraction made of each chunk, and the merged graph.

``extractions.parquet`` has one row per extracted chunk (attempts, error, counts
kept and filtered: ``kgrag.graphs.elements.counts_frame``), which the evaluation
reads for its extraction figures; the merged entity and relationship tables are
``kgrag.contents.entities``'.

Where one cache entry holds a chunk's whole extraction (method ``nlp``), the counts also
have that entry's ``key``, and ``entity_members.parquet`` and
``relationship_members.parquet`` keep every chunk's members as the merge read them
(``kgrag.graphs.merge.member_frames``): the next build over a changed corpus takes the
chunks it shares with this one from here (``read_members``), a columnar read, rather
than replaying each from the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from kgrag.contents.entities import (
    ENTITIES_FILE,
    RELATIONSHIPS_FILE,
    read_entities,
    read_relationships,
)
from kgrag.errors import KgragError
from kgrag.graphs.merge import MergeFiles

EXTRACTIONS = "extractions.parquet"
ENTITY_MEMBERS = "entity_members.parquet"
RELATIONSHIP_MEMBERS = "relationship_members.parquet"


def write_counts(folder: Path, counts: pl.DataFrame) -> None:
    counts.write_parquet(folder / EXTRACTIONS)


def merge_files(folder: Path, members: bool) -> MergeFiles:
    """Where the extract step's merge writes its tables and, with ``members``, every
    chunk's members in order (``kgrag.graphs.merge.merge_to``)."""
    return MergeFiles(folder / ENTITIES_FILE, folder / RELATIONSHIPS_FILE,
                      (folder / ENTITY_MEMBERS, folder / RELATIONSHIP_MEMBERS) if members
                      else None)


@dataclass
class Members:
    """Chunks taken from an earlier ``extract`` artefact: their counts rows (with
    ``key``), and their entity and relationship members, each chunk's in its order."""

    counts: pl.DataFrame
    entities: pl.DataFrame
    relationships: pl.DataFrame


def read_members(folder: Path, chunks: pl.DataFrame) -> Members | None:
    """The chunks of ``chunks`` (``chunk_id``, ``key``) whose key ``folder``'s artefact
    extracted without error, with its counts and members, named by their own chunk ids
    (a key's chunks have one text, so one extraction); None where the artefact keeps no
    members."""
    if not (folder / ENTITY_MEMBERS).exists():
        return None
    held = (pl.read_parquet(folder / EXTRACTIONS).filter(pl.col("error").is_null())
            .unique("key", keep="first", maintain_order=True))
    now = chunks.join(held.select(pl.col("chunk_id").alias("held"), "key"), on="key",
                      maintain_order="left")

    def members(name: str) -> pl.DataFrame:
        rows = pl.scan_parquet(folder / name)
        columns = rows.collect_schema().names()
        return (rows.with_row_index("order").rename({"chunk_id": "held"})
                .join(now.lazy().select("held", "chunk_id"), on="held")
                .sort("chunk_id", "order").select(columns).collect())

    counts = now.join(held.drop("key").rename({"chunk_id": "held"}), on="held",
                      maintain_order="left").drop("held")
    return Members(counts.select(held.columns), members(ENTITY_MEMBERS),
                   members(RELATIONSHIP_MEMBERS))


def read_extraction(folder: Path, reader: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The merged entities and relationships; none is an error of the step ``reader``
    that builds on them."""
    entities, relationships = read_entities(folder), read_relationships(folder)
    if entities.is_empty():
        raise KgragError(f"{reader}: the extraction produced no entities (see the extract "
                         "step's failed_chunks in the manifest); nothing to build")
    return entities, relationships


def read_counts(folder: Path) -> pl.DataFrame:
    """The per-chunk extraction record (``extractions.parquet``)."""
    return pl.read_parquet(folder / EXTRACTIONS)
