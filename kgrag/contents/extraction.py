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

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.contents.entities import (
    ENTITIES_FILE,
    RELATIONSHIPS_FILE,
    read_entities,
    read_relationships,
)
from kgrag.errors import KgragError
from kgrag.graphs.merge import (
    ENTITY_MEMBER_SCHEMA,
    MERGE_BATCH,
    RELATIONSHIP_MEMBER_SCHEMA,
    MergeFiles,
)

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


# Chunks taken from an earlier artefact whose members are handed to the merge at a time:
# as many as a batch of new extractions (``kgrag.graphs.merge.MERGE_BATCH``).
KEPT_BATCH = MERGE_BATCH


@dataclass
class Members:
    """Chunks taken from an earlier ``extract`` artefact (``folder``): their counts rows
    (with ``key``), and their members, read back from there by ``batches``."""

    counts: pl.DataFrame
    names: pl.DataFrame  # ``held``: a chunk id of the earlier build → ``chunk_id``: this one's
    folder: Path

    def batches(self) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
        """The chunks' entity and relationship members as ``merge_to`` takes them, each
        chunk's in its order, named by this build's chunk ids: the two files, written in
        the same chunk order, read side by side in about ``KEPT_BATCH`` chunks' rows at a
        time, so that what is held is a batch whatever the corpus."""
        import pyarrow.parquet as pq

        slices = max(1, -(-self.counts.height // KEPT_BATCH))
        readers = []
        for name in (ENTITY_MEMBERS, RELATIONSHIP_MEMBERS):
            table = pq.ParquetFile(self.folder / name)
            readers.append(table.iter_batches(-(-table.metadata.num_rows // slices) or 1))
        for entities, relationships in itertools.zip_longest(*readers):
            yield (self._renamed(entities, ENTITY_MEMBER_SCHEMA),
                   self._renamed(relationships, RELATIONSHIP_MEMBER_SCHEMA))

    def _renamed(self, batch: Any, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """A batch's members of the chunks taken, named by this build's chunk ids (a
        member of a text two chunks share is each one's), in the batch's order."""
        if batch is None:
            return pl.DataFrame(schema=schema)
        rows = pl.from_arrow(batch)
        assert isinstance(rows, pl.DataFrame), "a record batch reads as a frame"
        return (rows.rename({"chunk_id": "held"})
                .join(self.names, on="held", maintain_order="left")
                .select(list(schema)).cast(pl.Schema(schema)))


def read_members(folder: Path, chunks: pl.DataFrame) -> Members | None:
    """The chunks of ``chunks`` (``chunk_id``, ``key``) whose key ``folder``'s artefact
    extracted without error, with their counts, their members to read back
    (``Members.batches``; a key's chunks have one text, so one extraction); None where the
    artefact keeps no members. Each member file is read through once here, a batch at a
    time, so that damage shows now, while the step can still build without it, rather
    than in the middle of the merge."""
    import pyarrow.parquet as pq

    if not (folder / ENTITY_MEMBERS).exists():
        return None
    held = (pl.read_parquet(folder / EXTRACTIONS).filter(pl.col("error").is_null())
            .unique("key", keep="first", maintain_order=True))
    now = chunks.join(held.select(pl.col("chunk_id").alias("held"), "key"), on="key",
                      maintain_order="left")
    for name in (ENTITY_MEMBERS, RELATIONSHIP_MEMBERS):
        for _ in pq.ParquetFile(folder / name).iter_batches():
            pass
    counts = now.join(held.drop("key").rename({"chunk_id": "held"}), on="held",
                      maintain_order="left").drop("held")
    return Members(counts.select(held.columns), now.select("held", "chunk_id"), folder)


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
