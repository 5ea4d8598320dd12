"""The ``extract`` artefact: what extraction made of each chunk, and the merged graph.

``extractions.parquet`` has one row per extracted chunk (attempts, error, counts
kept and filtered: ``kgrag.graphs.extraction.counts_frame``), which the evaluation
reads for its extraction figures; the merged entity and relationship tables are
``kgrag.contents.entities``'.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kgrag.contents.entities import write_entity_tables

EXTRACTIONS = "extractions.parquet"


def write_extraction(folder: Path, counts: pl.DataFrame, entities: pl.DataFrame,
                     relationships: pl.DataFrame) -> None:
    counts.write_parquet(folder / EXTRACTIONS)
    write_entity_tables(folder, entities, relationships)


def read_counts(folder: Path) -> pl.DataFrame:
    """The per-chunk extraction record (``extractions.parquet``)."""
    return pl.read_parquet(folder / EXTRACTIONS)
