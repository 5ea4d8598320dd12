"""Vector tables: a flat scan up to the ANN threshold, a LanceDB ANN index past it, whose
search settings travel with the table and whose failure to build is an error."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgrag.errors import KgragError
from kgrag.store.vectors import ANN_SUFFIX, Part, VectorTable, ann_settings

HNSW = {"min_rows": 100, "index": "ivf_hnsw_sq", "m": 20, "ef_construction": 300,
        "nprobes": 20}


def clustered(rows: int, seed: int = 0) -> np.ndarray:
    """Unit vectors in 20 clusters, as embeddings of passages on a few topics fall."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, 64))
    vectors = centres[rng.integers(0, 20, rows)] + rng.normal(0, 0.3, (rows, 64))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_past_the_threshold_the_table_is_searched_through_an_index(tmp_path: Path) -> None:
    vectors = clustered(600)
    ids = [f"c{i}" for i in range(600)]
    VectorTable.create(tmp_path, "chunks", ids, vectors, HNSW)
    table = VectorTable.open(tmp_path, "chunks")
    assert table.ann == {"index": "ivf_hnsw_sq", "nprobes": 20}
    assert (tmp_path / f"chunks{ANN_SUFFIX}").exists()
    assert list((tmp_path / "chunks.lance" / "_indices").rglob("*.idx"))
    # every partition probed: the index's top hit is the exact one
    for row in (0, 17, 599):
        assert table.search(vectors[row], 3)[0][0] == f"c{row}"


def test_at_or_below_the_threshold_the_scan_stays_flat(tmp_path: Path) -> None:
    vectors = clustered(100)
    table = VectorTable.create(tmp_path, "chunks", [f"c{i}" for i in range(100)], vectors, HNSW)
    assert table.ann is None and VectorTable.open(tmp_path, "chunks").ann is None
    assert not (tmp_path / "chunks.lance" / "_indices").exists()
    exact = np.argsort(-(vectors @ vectors[5]), kind="stable")[:5]
    assert [i for i, _ in table.search(vectors[5], 5)] == [f"c{i}" for i in exact]


def test_an_ivf_pq_index_refined_finds_what_the_flat_scan_finds(tmp_path: Path) -> None:
    vectors = clustered(1000, seed=1)
    ids = [f"c{i}" for i in range(1000)]
    ann = ann_settings({**HNSW, "index": "ivf_pq", "partitions": 4, "sub_vectors": 16,
                        "nprobes": 4, "refine_factor": 20})
    assert "m" not in ann and "ef_construction" not in ann and ann["sub_vectors"] == 16
    table = VectorTable.create(tmp_path, "chunks", ids, vectors, ann)
    flat = VectorTable.create(tmp_path / "flat", "chunks", ids, vectors)
    for row in (3, 500):
        found, exact = table.search(vectors[row], 5), flat.search(vectors[row], 5)
        assert [i for i, _ in found] == [i for i, _ in exact]
        assert [s for _, s in found] == pytest.approx([s for _, s in exact], abs=1e-5)


def test_an_ef_under_the_rows_a_search_fetches_is_raised_to_them(tmp_path: Path) -> None:
    """ppr asks an index for its 64 nearest chunks whatever the spec's ef: LanceDB refuses
    an ef under the rows fetched (k, times refine_factor) in the middle of a query."""
    vectors = clustered(600, seed=2)
    ids = [f"c{i}" for i in range(600)]
    table = VectorTable.create(tmp_path, "chunks", ids, vectors,
                               {**HNSW, "ef": 8, "refine_factor": 4})
    flat = VectorTable.create(tmp_path / "flat", "chunks", ids, vectors)
    for row in (5, 300):
        found = table.search(vectors[row], 30)
        assert len(found) == 30 and found[0][0] == f"c{row}"
        assert len({i for i, _ in found} & {i for i, _ in flat.search(vectors[row], 30)}) >= 27


def test_an_index_that_cannot_be_trained_is_an_error_not_a_silent_flat_scan(
        tmp_path: Path) -> None:
    """LanceDB lists an IVF-PQ index on fewer rows than its 256 centroids, holding none."""
    with pytest.raises(KgragError, match="ivf_pq index cannot be built on 50 rows"):
        VectorTable.create(tmp_path, "chunks", [f"c{i}" for i in range(50)], clustered(50),
                           {**HNSW, "min_rows": 10, "index": "ivf_pq"})


def test_a_grown_table_keeps_its_index_and_holds_exactly_the_new_rows(tmp_path: Path) -> None:
    vectors = clustered(700)
    ids = [f"c{i}" for i in range(700)]
    VectorTable.create(tmp_path / "before", "chunks", ids[:600], vectors[:600], HNSW)
    # five rows gone, three changed, a hundred new (a sixth of the table), in two parts
    now_ids = ids[5:700]
    now = vectors[5:700].copy()
    now[[10, 20, 30]] = clustered(3, seed=1)
    changed = [now_ids[n] for n in (10, 20, 30)]
    added = changed + now_ids[595:]
    added_vectors = np.concatenate([now[[10, 20, 30]], now[595:]])
    (tmp_path / "after").mkdir()
    table = VectorTable.grow(tmp_path / "after", "chunks", tmp_path / "before",
                             ids[:5] + changed, [Part(added[:50], added_vectors[:50]),
                                                 Part(added[50:], added_vectors[50:])])
    assert table.folded == 103
    reopened = VectorTable.open(tmp_path / "after", "chunks")
    got_ids, got = reopened.rows()
    order = np.argsort(got_ids)
    assert sorted(got_ids) == sorted(now_ids)
    assert np.array_equal(got[order], now[np.argsort(now_ids)])
    assert reopened.ann == {"index": "ivf_hnsw_sq", "nprobes": 20}
    for row in (10, 20, 600, 694):  # changed and new rows are found through the index
        assert reopened.search(now[row], 3)[0][0] == now_ids[row]
    # the earlier table is untouched
    assert sorted(VectorTable.open(tmp_path / "before", "chunks").rows()[0]) == sorted(ids[:600])


def test_a_table_written_in_parts_is_the_table_of_their_rows_in_order(tmp_path: Path) -> None:
    vectors = clustered(300)
    ids = [f"c{i}" for i in range(300)]
    parts = [Part(ids[s:s + 70], vectors[s:s + 70], [f"d{i}" for i in range(s, min(s + 70, 300))])
             for s in range(0, 300, 70)]
    table = VectorTable.write(tmp_path, "chunks", iter(parts)).indexed(HNSW)
    assert table.ann is not None and table.dim == 64
    got_ids, got = VectorTable.open(tmp_path, "chunks").rows()
    assert got_ids == ids and np.array_equal(got, vectors)
    assert table.digests().column("digest").to_pylist() == [f"d{i}" for i in range(300)]
    with pytest.raises(KgragError, match="of no rows"):
        VectorTable.write(tmp_path / "none", "chunks", iter([]))
    assert VectorTable.create(tmp_path / "plain", "chunks", ids[:5], vectors[:5]).digests() is None


def test_a_grown_table_whose_index_record_cannot_be_copied_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last thing growing does is copy the index's record; when that fails (a disk
    full), the table already copied is removed too, so that ``create`` can build it in
    the same folder."""
    vectors = clustered(640)
    ids = [f"c{i}" for i in range(640)]
    VectorTable.create(tmp_path / "before", "chunks", ids[:600], vectors[:600], HNSW)
    copy = shutil.copyfile

    def full(source: Any, target: Any, **kwargs: Any) -> Any:
        if str(source).endswith(ANN_SUFFIX):
            raise OSError(28, "No space left on device")
        return copy(source, target, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", full)
    (tmp_path / "after").mkdir()
    with pytest.raises(OSError, match="No space"):
        VectorTable.grow(tmp_path / "after", "chunks", tmp_path / "before", [],
                         [Part(ids[600:], vectors[600:])])
    assert not list((tmp_path / "after").iterdir())
    monkeypatch.undo()
    VectorTable.create(tmp_path / "after", "chunks", ids, vectors, HNSW)


def test_a_table_read_in_batches_holds_every_row_as_stored_in_table_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kgrag.store.vectors.READ_ROWS", 4)
    vectors = clustered(11) * np.arange(1, 12, dtype=np.float32)[:, None]
    ids = [f"c{i}" for i in range(11)]
    table = VectorTable.create(tmp_path, "chunks", ids, vectors)
    assert table.rows()[0] == ids and np.array_equal(table.rows()[1], vectors)
    normalised = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert np.array_equal(table.matrix()[1], normalised)
