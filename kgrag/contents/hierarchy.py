"""The ``hierarchy`` artefact (HugRAG's graph): canonical entities, their modules.

The numbered entity and relationship tables (``kgrag.contents.entities``), each row
with the ``text`` HugRAG shows and its ``tokens``, entities also with their leaf
``module_id``; the entity vectors; and ``modules.parquet``, the recursive Leiden
module tree (``module_id``, ``level``, ``parent``, ``children``, ``entities``), empty
when the graph was too small for a hierarchy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from kgrag.contents.columns import ColumnTypes
from kgrag.contents.entities import write_entity_tables, write_entity_vectors
from kgrag.graphs.hierarchy import Hierarchy, Module

MODULES_FILE = "modules.parquet"
MODULE_SCHEMA: ColumnTypes = {"module_id": pl.String, "level": pl.Int64, "parent": pl.String,
                              "children": pl.List(pl.String), "entities": pl.List(pl.String)}


def write_hierarchy(folder: Path, entities: pl.DataFrame, relationships: pl.DataFrame,
                    hierarchy: Hierarchy, entity_vectors: np.ndarray) -> None:
    write_entity_tables(folder, entities, relationships)
    pl.DataFrame([{"module_id": m.module_id, "level": m.level, "parent": m.parent,
                   "children": list(m.children), "entities": list(m.entities)}
                  for m in hierarchy.modules], schema=MODULE_SCHEMA
                 ).write_parquet(folder / MODULES_FILE)
    write_entity_vectors(folder, entities["entity_id"].to_list(), entity_vectors)


def read_modules(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / MODULES_FILE)


def read_hierarchy(folder: Path) -> Hierarchy:
    """The module tree (what the summary and gate steps need of it)."""
    return Hierarchy(
        modules=[Module(module_id=m, level=level, parent=parent, children=tuple(children),
                        entities=tuple(members))
                 for m, level, parent, children, members in read_modules(folder).iter_rows()],
        unclustered=(), oversized=0)
