"""The ``skeleton`` artefact (KET-RAG's KG skeleton), what GraphRAG local search reads.

The numbered entity and relationship tables (``kgrag.contents.entities``) with a
rendered table ``row`` each and its ``row_tokens``, the entity vectors, relationship
vectors (for users: no strategy reads them) and a GraphML export of the graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from kgrag.contents.entities import write_entity_tables, write_entity_vectors
from kgrag.store.vectors import VectorTable

if TYPE_CHECKING:
    import networkx as nx

RELATIONSHIP_TABLE = "relationships"  # vectors of "source -- target: description"
GRAPHML = "skeleton.graphml"


def write_skeleton(folder: Path, entities: pl.DataFrame, relationships: pl.DataFrame,
                   entity_vectors: np.ndarray, relationship_vectors: np.ndarray | None,
                   graph: nx.Graph) -> None:
    """The tables, the entity vectors, the relationship vectors unless None, the graph."""
    write_entity_tables(folder, entities, relationships)
    write_entity_vectors(folder, entities["entity_id"].to_list(), entity_vectors)
    if relationship_vectors is not None:
        VectorTable.create(folder, RELATIONSHIP_TABLE, relationships["relationship_id"].to_list(),
                           relationship_vectors)
    import networkx as nx  # imported by the step that writes a skeleton, not by every command

    nx.write_graphml(graph, folder / GRAPHML)
