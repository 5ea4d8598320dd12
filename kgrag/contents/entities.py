"""The entity and relationship tables that every graph build writes: the extraction
(``kgrag.contents.extraction``), KET-RAG's skeleton and HugRAG's hierarchy.

All three hold ``entities.parquet`` (one row per entity: ``name``, ``type``,
``description``, ``source_chunk_ids`` …) and ``relationships.parquet`` (``source``,
``target``, ``description``, ``strength``, ``weight``, ``source_chunk_ids`` …). The
skeleton and the hierarchy number them (``numbered``) and add what their searches
read, and both store entity vectors by ``entity_id`` in the vector table
``entities``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from kgrag.contents.columns import parquet_parts
from kgrag.store.vectors import VectorTable

ENTITIES_FILE = "entities.parquet"
RELATIONSHIPS_FILE = "relationships.parquet"
ENTITY_TABLE = "entities"


def numbered(entities: pl.DataFrame, relationships: pl.DataFrame
             ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tables with ids in row order (``E1``…, ``R1``…) and ``chunk_ids``, the chunks
    each row was extracted from, which the searches map to their text units."""
    return (entities.with_columns(entity_id=pl.format("E{}", pl.int_range(1, pl.len() + 1)),
                                  chunk_ids=pl.col("source_chunk_ids")),
            relationships.with_columns(
                relationship_id=pl.format("R{}", pl.int_range(1, pl.len() + 1)),
                chunk_ids=pl.col("source_chunk_ids")))


def write_entity_tables(folder: Path, entities: pl.DataFrame,
                        relationships: pl.DataFrame) -> None:
    entities.write_parquet(folder / ENTITIES_FILE)
    relationships.write_parquet(folder / RELATIONSHIPS_FILE)


def read_entities(folder: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return pl.read_parquet(folder / ENTITIES_FILE, columns=columns)


def entity_parts(folder: Path, columns: list[str], rows: int) -> Iterator[pl.DataFrame]:
    """The entity table's ``columns``, ``rows`` rows at a time in table order: for a
    reader that keeps a little of each row, so that the whole table is never held."""
    return parquet_parts(folder / ENTITIES_FILE, columns, rows)


def relationship_parts(folder: Path, columns: list[str], rows: int) -> Iterator[pl.DataFrame]:
    """The relationship table's ``columns``, ``rows`` rows at a time (``entity_parts``)."""
    return parquet_parts(folder / RELATIONSHIPS_FILE, columns, rows)


def read_relationships(folder: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return pl.read_parquet(folder / RELATIONSHIPS_FILE, columns=columns)


def entity_degrees(folder: Path) -> list[int]:
    """Each entity's number of relationships (either end), in table order; an entity in
    none has degree 0 (what a report's degree distribution counts)."""
    ends = read_relationships(folder, ["source", "target"])
    counts = pl.concat([ends["source"], ends["target"]]).alias("name").value_counts(name="degree")
    return (read_entities(folder, ["name"]).join(counts, on="name", how="left")
            ["degree"].fill_null(0).to_list())


def write_entity_vectors(folder: Path, entity_ids: list[str], vectors: np.ndarray) -> None:
    VectorTable.create(folder, ENTITY_TABLE, entity_ids, vectors)


def open_entity_vectors(folder: Path) -> VectorTable:
    return VectorTable.open(folder, ENTITY_TABLE)
