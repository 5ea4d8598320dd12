"""The ``extract`` artefact: what extraction made of each chunk, and the merged graph.

``extractions.parquet`` has one row per extracted chunk (attempts, error, counts
kept and filtered: ``kgrag.graphs.elements.counts_frame``), which the evaluation
reads for its extraction figures; the merged entity and relationship tables are
``kgrag.contents.entities``'.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kgrag.contents.entities import read_entities, read_relationships, write_entity_tables
from kgrag.errors import KgragError

EXTRACTIONS = "extractions.parquet"


def write_extraction(folder: Path, counts: pl.DataFrame, entities: pl.DataFrame,
                     relationships: pl.DataFrame) -> None:
    counts.write_parquet(folder / EXTRACTIONS)
    write_entity_tables(folder, entities, relationships)


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
