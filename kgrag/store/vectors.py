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
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kgrag.errors import KgragError

if TYPE_CHECKING:
    import lancedb


# An ANN index's search settings, beside its table: how the index was built and how it
# is searched belong together (both are in the step's fingerprint), and a reader then
# needs nothing but the folder.
ANN_SUFFIX = ".ann.json"
# A grown table keeps its index when at most this share of its rows is new (the caller
# of ``grow`` judges): past it the index is trained anew, as the partitions learnt from
# the old rows may fit the new ones poorly (LanceDB's advice; the share is a judgement,
# not a measurement).
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


class Part(NamedTuple):
    """Rows of a table: ids, their vectors and, where the caller keeps one, a digest of
    what each vector embeds (``digest``, to tell later which rows changed)."""

    ids: list[str]
    vectors: np.ndarray
    digests: list[str] | None = None


class VectorTable:
    """Cosine search over unit vectors: a flat (exact) scan, or past ``ann["min_rows"]``
    rows an approximate one through a LanceDB ANN index (``create``'s ``ann``, the spec's
    ``dense_index.ann``). At tens of thousands of rows the flat scan is both faster to
    build and more accurate; at a million it costs a question about a second."""

    def __init__(self, table: lancedb.table.Table, folder: Path,
                 ann: dict[str, Any] | None = None, folded: int | None = None) -> None:
        # folded: the rows added to an earlier table's index (``grow``), None if built
        self._table, self._folder, self.ann, self.folded = table, folder, ann, folded

    @classmethod
    def create(cls, folder: Path, name: str, ids: list[str], vectors: np.ndarray,
               ann: dict[str, Any] | None = None) -> VectorTable:
        """A table of ``ids`` and their ``vectors``, with the ANN index ``ann`` asks for at
        its size."""
        return cls.write(folder, name, [Part(ids, vectors)]).indexed(ann)

    @classmethod
    def write(cls, folder: Path, name: str, parts: Iterable[Part]) -> VectorTable:
        """A table of the rows of ``parts``, in order, appended a part at a time: the
        caller holds one part's vectors, never the table's. No ANN index (``indexed``)."""
        import lancedb

        table = None
        for part in parts:
            rows = _rows(part)
            if table is None:
                table = lancedb.connect(str(folder)).create_table(name, data=rows)
            else:
                table.add(rows)
        if table is None:
            raise KgragError(f"cannot make vector table {name!r} of no rows")
        return cls(table, folder)

    def indexed(self, ann: dict[str, Any] | None) -> VectorTable:
        """This table searched through the ANN index ``ann`` describes, built now, where
        it has more than ``ann["min_rows"]`` rows; else searched by a flat scan."""
        if ann is None or len(self) <= ann["min_rows"]:
            return self
        _build_index(self._table, ann)
        search = {key: ann[key] for key in SEARCH_KEYS if key in ann}
        (self._folder / f"{self._table.name}{ANN_SUFFIX}").write_text(
            json.dumps(search, sort_keys=True))
        return VectorTable(self._table, self._folder, search)

    @classmethod
    def grow(cls, folder: Path, name: str, earlier: Path, gone: list[str],
             added: Iterable[Part]) -> VectorTable:
        """``earlier``'s table ``name``, which has an ANN index, copied into ``folder``,
        the rows of the ``gone`` ids deleted and the rows of ``added`` appended and folded
        into its index (LanceDB's ``optimize``, which keeps the partitions the index was
        trained on): a second or so, where training the index anew takes minutes. The
        caller judges whether the old partitions still fit (``FOLD_SHARE``). Whatever
        fails midway leaves nothing in ``folder``."""
        import lancedb

        # the index statistics read here (row counts) need no centroids: LanceDB's coming
        # default, which also silences its warning about the present one on every grow
        os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
        before = cls.open(earlier, name)
        if before.ann is None:
            raise KgragError(f"{earlier / name} has no ANN index to grow")
        copy = folder / f"{name}.lance"
        try:
            shutil.copytree(earlier / f"{name}.lance", copy)
            table = lancedb.connect(str(folder)).open_table(name)
            if gone:
                quoted = ",".join("'" + i.replace("'", "''") + "'" for i in gone)
                table.delete(f"id IN ({quoted})")
            folded = 0
            for part in added:
                table.add(_rows(part))
                folded += len(part.ids)
            table.optimize()
            if sum(index.num_unindexed_rows or 0 for index in table.list_indices()):
                raise KgragError(f"the index of {earlier / name} did not take the new rows")
            shutil.copyfile(earlier / f"{name}{ANN_SUFFIX}", folder / f"{name}{ANN_SUFFIX}")
        except BaseException:  # nothing left, for ``write`` to build the table instead
            shutil.rmtree(copy, ignore_errors=True)
            (folder / f"{name}{ANN_SUFFIX}").unlink(missing_ok=True)
            raise
        return cls(table, folder, before.ann, folded)

    @classmethod
    def open(cls, folder: Path, name: str) -> VectorTable:
        import lancedb

        try:
            table = lancedb.connect(str(folder)).open_table(name)
        except (FileNotFoundError, ValueError) as exc:
            raise KgragError(f"no vector table {name!r} in {folder}: {exc}") from exc
        settings = folder / f"{name}{ANN_SUFFIX}"
        return cls(table, folder,
                   json.loads(settings.read_text()) if settings.exists() else None)

    def __len__(self) -> int:
        return self._table.count_rows()

    @property
    def dim(self) -> int:
        return int(self._table.schema.field("vector").type.list_size)

    def digests(self) -> Any:
        """Every row's id and ``digest`` (``Part.digests``), as an Arrow table; None where
        the table keeps no digests (one written without, or before they were kept)."""
        if "digest" not in self._table.schema.names:
            return None
        return self._table.search().select(["id", "digest"]).limit(None).to_arrow()

    def matrix(self) -> tuple[list[str], np.ndarray]:
        """Every id with its vector, row-normalised (float32), for in-memory search.

        Strategies that search several tables per question hold them as matrices: a
        product with up to ~20,000 rows takes about a millisecond, less than one
        LanceDB query's fixed cost. Rows are normalised so that a product with a unit
        query is the cosine (keyword vectors are stored as unnormalised means).
        """
        ids, values = self.rows()
        return ids, unit_rows(values)

    def rows(self) -> tuple[list[str], np.ndarray]:
        """Every id with its vector as stored (float32), read ``READ_ROWS`` rows at a time
        into one matrix. The whole table as Arrow, then its copy as float32 held three
        matrices at once, and left most of the 530 MB it took at 110,056 rows of 384
        dimensions resident after (docs/scale.md); this holds the matrix and one batch."""
        values = np.empty((len(self), self.dim), dtype=np.float32)
        ids: list[str] = []
        for batch_ids, batch in self.batches():
            values[len(ids):len(ids) + len(batch_ids)] = batch
            ids += batch_ids
        return ids, values

    def batches(self) -> Iterator[tuple[list[str], np.ndarray]]:
        """The ids and vectors as stored (float32), ``READ_ROWS`` rows at a time, in the
        table's order (that of ``ids``)."""
        size, read = self.dim, 0
        query = self._table.search().select(["id", "vector"]).limit(None)
        for batch in query.to_batches(READ_ROWS):
            flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            read += batch.num_rows
            yield batch.column("id").to_pylist(), flat.reshape(batch.num_rows, size)
        if read != len(self):
            raise KgragError(f"vector table {self._table.name!r} changed while it was read")

    def ids(self) -> list[str]:
        """Every id, in the table's order."""
        ids: list[str] = []
        for batch in self._table.search().select(["id"]).limit(None).to_batches(READ_ROWS):
            ids += batch.column("id").to_pylist()
        return ids

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


def unit_rows(values: np.ndarray) -> np.ndarray:
    """``values`` with each row scaled to unit length in place (a zero row stays zero)."""
    norms = np.linalg.norm(values, axis=1, keepdims=True)
    values /= np.where(norms > 0, norms, 1.0)
    return values


def _rows(part: Part) -> Any:
    """An Arrow table of ``part``'s ids, float32 vectors and digests where it has them."""
    import pyarrow as pa

    if len(part.ids) != len(part.vectors) or not part.ids or (
            part.digests is not None and len(part.digests) != len(part.ids)):
        raise KgragError(f"cannot index {len(part.ids)} ids with {len(part.vectors)} vectors")
    vectors = part.vectors.astype(np.float32)
    columns = {"id": pa.array(part.ids, pa.string()),
               "vector": pa.FixedSizeListArray.from_arrays(
                   pa.array(vectors.ravel(), pa.float32()), vectors.shape[1])}
    if part.digests is not None:
        columns["digest"] = pa.array(part.digests, pa.string())
    return pa.table(columns)


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
