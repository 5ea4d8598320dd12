"""Vector tables in embedded LanceDB, one table per embedded thing.

The database lives inside a step's artefact folder, so it is written
atomically with the rest of the artefact and travels with the run.

LanceDB and pyarrow are imported when a table is created or opened, not with this
module: the step kinds and strategies that use tables are imported by every command
(their declarations are the spec's registries), and importing LanceDB costs more than
all the rest of `kgrag validate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kgrag.errors import KgragError

if TYPE_CHECKING:
    import lancedb


class VectorTable:
    """Exact cosine search over unit vectors (a flat scan: at tens of thousands of rows
    it is both faster to build and more accurate than an ANN index)."""

    def __init__(self, table: lancedb.table.Table) -> None:
        self._table = table

    @classmethod
    def create(cls, folder: Path, name: str, ids: list[str], vectors: np.ndarray) -> VectorTable:
        if len(ids) != len(vectors) or not ids:
            raise KgragError(f"cannot index {len(ids)} ids with {len(vectors)} vectors")
        import lancedb
        import pyarrow as pa

        dim = vectors.shape[1]
        data = pa.table({
            "id": pa.array(ids, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.astype(np.float32).ravel(), pa.float32()), dim),
        })
        return cls(lancedb.connect(str(folder)).create_table(name, data=data))

    @classmethod
    def open(cls, folder: Path, name: str) -> VectorTable:
        import lancedb

        try:
            return cls(lancedb.connect(str(folder)).open_table(name))
        except (FileNotFoundError, ValueError) as exc:
            raise KgragError(f"no vector table {name!r} in {folder}: {exc}") from exc

    def __len__(self) -> int:
        return self._table.count_rows()

    def matrix(self) -> tuple[list[str], np.ndarray]:
        """Every id with its vector, row-normalised (float32), for in-memory search.

        Strategies that search several tables per question hold them as matrices: a
        product with up to ~20,000 rows takes about a millisecond, less than one
        LanceDB query's fixed cost. Rows are normalised so that a product with a unit
        query is the cosine (keyword vectors are stored as unnormalised means).
        """
        table = self._table.to_arrow()
        ids = table.column("id").to_pylist()
        column = table.column("vector").combine_chunks()
        values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        values = values.reshape(len(ids), column.type.list_size)
        norms = np.linalg.norm(values, axis=1, keepdims=True)
        return ids, values / np.where(norms > 0, norms, 1.0)

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest ids with their cosine similarity, best first."""
        from lancedb.query import LanceVectorQueryBuilder

        query = self._table.search(vector.astype(np.float32), query_type="vector")
        assert isinstance(query, LanceVectorQueryBuilder), "a vector query builds a vector search"
        result = query.distance_type("cosine").select(["id", "_distance"]).limit(k).to_arrow()
        ids = result.column("id").to_pylist()
        distances = result.column("_distance").to_pylist()
        return [(i, 1.0 - d) for i, d in zip(ids, distances)]
