"""Vector tables in embedded LanceDB, one table per embedded thing.

The database lives inside a step's artefact folder, so it is written
atomically with the rest of the artefact and travels with the run.

LanceDB and pyarrow are imported when a table is created or opened, not with this
module: the step kinds and strategies that use tables are imported by every command
(their declarations are the spec's registries), and importing LanceDB costs more than
all the rest of `kgrag validate`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.errors import KgragError

if TYPE_CHECKING:
    import lancedb


# An ANN index's search settings, beside its table: how the index was built and how it
# is searched belong together (both are in the step's fingerprint), and a reader then
# needs nothing but the folder.
ANN_SUFFIX = ".ann.json"
# A grown table keeps its index when at most this share of its rows is new; past it
# the index is trained anew, as the partitions learnt from the old rows may fit the
# new ones poorly (LanceDB's advice; the share is a judgement, not a measurement).
FOLD_SHARE = 0.2
# Rows a table is read in at a time (``rows``): 12 MB of 384-dimension vectors.
READ_ROWS = 8192
SEARCH_KEYS = ("index", "nprobes", "ef", "refine_factor")
# the settings that shape each index type (the others would only split fingerprints)
BUILD_KEYS = {"ivf_pq": ("partitions", "sub_vectors"),
              "ivf_hnsw_sq": ("partitions", "m", "ef_construction")}


def ann_settings(ann: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``dense_index.ann`` without the settings its index type ignores (HNSW's
    for ivf_pq, PQ's for ivf_hnsw_sq): what the dense index's fingerprint holds."""
    ignored = {key for keys in BUILD_KEYS.values() for key in keys} - set(
        BUILD_KEYS[ann["index"]]) | ({"ef"} if ann["index"] == "ivf_pq" else set())
    return {key: value for key, value in ann.items() if key not in ignored}


class VectorTable:
    """Cosine search over unit vectors: a flat (exact) scan, or past ``ann["min_rows"]``
    rows an approximate one through a LanceDB ANN index (``create``'s ``ann``, the spec's
    ``dense_index.ann``). At tens of thousands of rows the flat scan is both faster to
    build and more accurate; at a million it costs a question about a second."""

    def __init__(self, table: lancedb.table.Table, ann: dict[str, Any] | None = None,
                 folded: int | None = None) -> None:
        # folded: the rows added to an earlier table's index (``grow``), None if built
        self._table, self.ann, self.folded = table, ann, folded

    @classmethod
    def create(cls, folder: Path, name: str, ids: list[str], vectors: np.ndarray,
               ann: dict[str, Any] | None = None) -> VectorTable:
        if len(ids) != len(vectors) or not ids:
            raise KgragError(f"cannot index {len(ids)} ids with {len(vectors)} vectors")
        import lancedb

        data = _rows(ids, vectors.astype(np.float32))
        table = lancedb.connect(str(folder)).create_table(name, data=data)
        if ann is None or len(ids) <= ann["min_rows"]:
            return cls(table)
        _build_index(table, ann)
        search = {key: ann[key] for key in SEARCH_KEYS if key in ann}
        (folder / f"{name}{ANN_SUFFIX}").write_text(json.dumps(search, sort_keys=True))
        return cls(table, search)

    @classmethod
    def grow(cls, folder: Path, name: str, earlier: Path, ids: list[str], vectors: np.ndarray,
             ann: dict[str, Any] | None) -> VectorTable | None:
        """``create``'s table of ``ids`` and ``vectors`` made from ``earlier``'s (a folder
        whose table ``name`` was made with the same ``ann`` over other rows): that table
        copied, the rows whose id is gone or whose vector changed deleted, the new ones
        added and folded into its index (LanceDB's ``optimize``, which keeps the partitions
        the index was trained on), a second or so where training the index takes minutes.
        None, for ``create`` to build it, where ``create`` would make no index or the
        earlier table has none, or more than ``FOLD_SHARE`` of the rows are new. Whatever
        fails midway leaves nothing in ``folder``."""
        import lancedb

        if (ann is None or len(ids) <= ann["min_rows"]
                or not (earlier / f"{name}{ANN_SUFFIX}").exists()):
            return None
        vectors = vectors.astype(np.float32)
        before = cls.open(earlier, name)
        old_ids, old_vectors = before.rows()
        at = {i: n for n, i in enumerate(old_ids)}
        same = np.array([i in at for i in ids])
        same[same] = (old_vectors[[at[i] for i, kept in zip(ids, same) if kept]]
                      == vectors[same]).all(axis=1)
        if (~same).sum() > FOLD_SHARE * len(ids):
            return None
        kept = {i for i, unchanged in zip(ids, same) if unchanged}
        gone = [i for i in old_ids if i not in kept]
        new = np.flatnonzero(~same)
        copy = folder / f"{name}.lance"
        try:
            shutil.copytree(earlier / f"{name}.lance", copy)
            table = lancedb.connect(str(folder)).open_table(name)
            if gone:
                quoted = ",".join("'" + i.replace("'", "''") + "'" for i in gone)
                table.delete(f"id IN ({quoted})")
            if len(new):
                table.add(_rows([ids[n] for n in new], vectors[new]))
            table.optimize()
            if sum(index.num_unindexed_rows or 0 for index in table.list_indices()):
                raise KgragError(f"the index of {earlier / name} did not take the new rows")
            shutil.copyfile(earlier / f"{name}{ANN_SUFFIX}", folder / f"{name}{ANN_SUFFIX}")
        except BaseException:  # nothing left for create, which builds the table instead
            shutil.rmtree(copy, ignore_errors=True)
            (folder / f"{name}{ANN_SUFFIX}").unlink(missing_ok=True)
            raise
        return cls(table, before.ann, len(new))

    @classmethod
    def open(cls, folder: Path, name: str) -> VectorTable:
        import lancedb

        try:
            table = lancedb.connect(str(folder)).open_table(name)
        except (FileNotFoundError, ValueError) as exc:
            raise KgragError(f"no vector table {name!r} in {folder}: {exc}") from exc
        settings = folder / f"{name}{ANN_SUFFIX}"
        return cls(table, json.loads(settings.read_text()) if settings.exists() else None)

    def __len__(self) -> int:
        return self._table.count_rows()

    def matrix(self) -> tuple[list[str], np.ndarray]:
        """Every id with its vector, row-normalised (float32), for in-memory search.

        Strategies that search several tables per question hold them as matrices: a
        product with up to ~20,000 rows takes about a millisecond, less than one
        LanceDB query's fixed cost. Rows are normalised so that a product with a unit
        query is the cosine (keyword vectors are stored as unnormalised means).
        """
        ids, values = self.rows()
        norms = np.linalg.norm(values, axis=1, keepdims=True)
        values /= np.where(norms > 0, norms, 1.0)
        return ids, values

    def rows(self) -> tuple[list[str], np.ndarray]:
        """Every id with its vector as stored (float32), read ``READ_ROWS`` rows at a time
        into one matrix. The whole table as Arrow, then its copy as float32 held three
        matrices at once, and left most of the 530 MB it took at 110,056 rows of 384
        dimensions resident after (docs/scale.md); this holds the matrix and one batch."""
        size = self._table.schema.field("vector").type.list_size
        values = np.empty((len(self), size), dtype=np.float32)
        ids: list[str] = []
        query = self._table.search().select(["id", "vector"]).limit(None)
        for batch in query.to_batches(READ_ROWS):
            flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            values[len(ids):len(ids) + batch.num_rows] = flat.reshape(batch.num_rows, size)
            ids += batch.column("id").to_pylist()
        if len(ids) != len(values):
            raise KgragError(f"vector table {self._table.name!r} changed while it was read")
        return ids, values

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest ids with their cosine similarity, best first: exact, or
        through the ANN index with its search settings when the table has one."""
        from lancedb.query import LanceVectorQueryBuilder

        query = self._table.search(vector.astype(np.float32), query_type="vector")
        assert isinstance(query, LanceVectorQueryBuilder), "a vector query builds a vector search"
        query = query.distance_type("cosine")
        if self.ann is not None:
            query = query.nprobes(self.ann["nprobes"])
            refine = self.ann.get("refine_factor")
            if self.ann.get("ef") is not None:
                # HNSW keeps at least the rows the search fetches (k, times refine_factor
                # where re-ranked); LanceDB refuses a smaller ef mid-query
                query = query.ef(max(self.ann["ef"], k * (refine or 1)))
            if refine is not None:
                query = query.refine_factor(refine)
        result = query.select(["id", "_distance"]).limit(k).to_arrow()
        ids = result.column("id").to_pylist()
        distances = result.column("_distance").to_pylist()
        return [(i, 1.0 - d) for i, d in zip(ids, distances)]


def _rows(ids: list[str], vectors: np.ndarray) -> Any:
    """An Arrow table of ``ids`` and their float32 ``vectors``."""
    import pyarrow as pa

    return pa.table({"id": pa.array(ids, pa.string()),
                     "vector": pa.FixedSizeListArray.from_arrays(
                         pa.array(vectors.ravel(), pa.float32()), vectors.shape[1])})


def _build_index(table: lancedb.table.Table, ann: dict[str, Any]) -> None:
    """The ANN index ``ann`` describes, on the table's vectors. LanceDB skips an IVF-PQ
    index it cannot train (fewer rows than PQ's 256 centroids) without a word (the
    index is listed, holding no rows), and such a table would answer by a flat scan
    fingerprinted as approximate: so rows left out of the index are an error."""
    from lancedb.index import IvfHnswSq, IvfPq

    partitions: int | None = ann.get("partitions")
    if ann["index"] == "ivf_pq":
        config: IvfPq | IvfHnswSq = IvfPq(distance_type="cosine", num_partitions=partitions,
                                          num_sub_vectors=ann.get("sub_vectors"))
    else:
        config = IvfHnswSq(distance_type="cosine", num_partitions=partitions, m=ann["m"],
                           ef_construction=ann["ef_construction"])
    try:
        table.create_index("vector", config=config)
    except (RuntimeError, ValueError) as exc:
        raise KgragError(f"the {ann['index']} index cannot be built on "
                         f"{table.count_rows()} rows: {exc}") from exc
    if sum(index.num_indexed_rows or 0 for index in table.list_indices()) < table.count_rows():
        raise KgragError(f"the {ann['index']} index cannot be built on {table.count_rows()} "
                         "rows (ivf_pq needs 256 or more); raise dense_index.ann.min_rows")
