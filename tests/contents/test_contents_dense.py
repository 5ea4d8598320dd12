"""The dense artefact made a part of the chunks at a time, and grown over a changed corpus
by embedding only the chunks whose text is new: real paragraphs, the bundled MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kgrag.contents.chunks import CHUNKS_FILE
from kgrag.contents.dense import (
    DENSE_TABLE,
    dense_matrix,
    dense_rows,
    digests,
    grow_dense,
    open_dense,
    write_dense,
    write_matrix,
)
from kgrag.errors import KgragError
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.progress import Progress
from kgrag.store.vectors import VectorTable
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")

HNSW = {"min_rows": 100, "index": "ivf_hnsw_sq", "m": 20, "ef_construction": 300,
        "nprobes": 20}


def paragraphs(count: int) -> list[str]:
    rows = [json.loads(line) for line in
            (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()]
    texts = [f"# {p['title']}\n{p['paragraph_text']}" for row in rows for p in row["paragraphs"]]
    return list(dict.fromkeys(texts))[:count]


def chunks(folder: Path, ids: list[str], texts: list[str]) -> Path:
    """A chunks artefact of those chunks, in row groups of 64 (parts cross them)."""
    folder.mkdir(parents=True)
    pl.DataFrame({"chunk_id": ids, "context": texts}).write_parquet(
        folder / CHUNKS_FILE, row_group_size=64)
    return folder


class Embedding:
    """The bundled embedder, keeping the size of every call."""

    def __init__(self, cache: Path) -> None:
        _, self.embedder = bundled_embedder(CallCache(cache))
        self.calls: list[int] = []

    def __call__(self, texts: list[str], progress: Progress) -> np.ndarray:
        self.calls.append(len(texts))
        return self.embedder.encode(texts, progress=progress)


@pytest.fixture(scope="module")
def embedding(tmp_path_factory: pytest.TempPathFactory) -> Embedding:
    return Embedding(tmp_path_factory.mktemp("cache"))


def test_the_table_is_written_a_part_at_a_time_with_each_texts_digest(
        tmp_path: Path, embedding: Embedding, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = paragraphs(200)
    ids = [f"d{i}:0" for i in range(200)]
    folder = chunks(tmp_path / "chunks", ids, texts)
    whole = write_dense(tmp_path / "whole", folder, embedding, HNSW)
    monkeypatch.setattr("kgrag.contents.dense.PART_ROWS", 45)
    embedding.calls.clear()
    table = write_dense(tmp_path / "parts", folder, embedding, HNSW)
    assert embedding.calls == [45, 45, 45, 45, 20]  # no call sees more than a part
    got_ids, got = open_dense(tmp_path / "parts").rows()
    assert got_ids == ids
    assert np.allclose(got, whole.rows()[1], atol=1e-6)
    assert table.ann is not None and table.dim == got.shape[1]
    assert table.digests().column("digest").to_pylist() == digests(texts)
    # the matrix file: the table's rows normalised, in its order, mapped read-only
    monkeypatch.setattr("kgrag.store.vectors.READ_ROWS", 64)
    write_matrix(tmp_path / "parts", table)
    mapped_ids, mapped = dense_matrix(tmp_path / "parts")
    assert mapped_ids == ids and isinstance(mapped, np.memmap) and not mapped.flags.writeable
    assert np.array_equal(mapped, table.matrix()[1])
    # read by rows, as a search over the index reads it: a few rows one by one, most of
    # them (past a sixteenth) block by block, the products those of the mapped rows
    read_ids, rows = dense_rows(tmp_path / "parts")
    assert read_ids == ids and len(rows) == 200
    monkeypatch.setattr("kgrag.contents.dense.BLOCK_ROWS", 64)
    vector = mapped[7] + mapped[150]
    for positions in ([3, 199, 0, 3], list(range(200))[::-1], list(range(0, 200, 2))):
        at = np.array(positions)
        assert np.array_equal(rows[at], mapped[at])
        assert np.array_equal(rows.dot(at, vector), mapped[at] @ vector)
    # a file cut short under an open reader: one error, not a reshape's
    matrix_file = Path(rows.file.name)
    with matrix_file.open("r+b") as handle:
        handle.truncate(matrix_file.stat().st_size - 100)
    with pytest.raises(KgragError, match="fewer rows than its header says"):
        rows.dot(np.arange(200), vector)


def test_a_changed_corpus_embeds_only_its_new_texts_into_the_earlier_index(
        tmp_path: Path, embedding: Embedding, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    texts = paragraphs(300)
    ids = [f"d{i}:0" for i in range(300)]
    write_dense(tmp_path / "before", chunks(tmp_path / "c0", ids[:250], texts[:250]),
                embedding, HNSW)
    # five chunks gone, three whose text changed under the same id, twenty new
    now_ids = ids[5:270]
    now = texts[5:270]
    for n in (10, 20, 30):
        now[n] += " A sentence added later."
    folder = chunks(tmp_path / "c1", now_ids, now)
    monkeypatch.setattr("kgrag.contents.dense.PART_ROWS", 10)
    embedding.calls.clear()
    (tmp_path / "after").mkdir()
    grown = grow_dense(tmp_path / "after", tmp_path / "before", folder, embedding, HNSW)
    assert grown is not None and grown.folded == 23
    assert "WARN" not in capfd.readouterr().err  # LanceDB's own log says nothing
    assert sum(embedding.calls) == 23 and max(embedding.calls) <= 10
    # the cold table of the new corpus, row for row
    cold = write_dense(tmp_path / "cold", folder, embedding, HNSW)
    got_ids, got = open_dense(tmp_path / "after").rows()
    cold_ids, cold_vectors = cold.rows()
    order = {i: n for n, i in enumerate(cold_ids)}
    assert sorted(got_ids) == sorted(now_ids)
    assert np.allclose(got, cold_vectors[[order[i] for i in got_ids]], atol=1e-6)
    held = dict(zip(*(grown.digests().column(c).to_pylist() for c in ("id", "digest"))))
    assert held == dict(zip(now_ids, digests(now)))
    for row in (10, 20, 260):  # changed and new rows are found through the index
        assert grown.search(got[got_ids.index(now_ids[row])], 1)[0][0] == now_ids[row]
    write_matrix(tmp_path / "after", grown)  # in the grown table's own row order
    mapped_ids, mapped = dense_matrix(tmp_path / "after")
    assert mapped_ids == got_ids and np.array_equal(mapped, grown.matrix()[1])


def test_a_corpus_changed_past_the_fold_share_or_without_an_index_is_built_anew(
        tmp_path: Path, embedding: Embedding) -> None:
    texts = paragraphs(300)
    ids = [f"d{i}:0" for i in range(300)]
    write_dense(tmp_path / "indexed", chunks(tmp_path / "c0", ids[:200], texts[:200]),
                embedding, HNSW)
    write_dense(tmp_path / "flat", chunks(tmp_path / "c1", ids[:90], texts[:90]),
                embedding, HNSW)
    (tmp_path / "after").mkdir()
    embedding.calls.clear()
    a_third_new = chunks(tmp_path / "c2", ids, texts)
    assert grow_dense(tmp_path / "after", tmp_path / "indexed", a_third_new, embedding,
                      HNSW) is None
    assert grow_dense(tmp_path / "after", tmp_path / "flat", chunks(
        tmp_path / "c3", ids[:120], texts[:120]), embedding, HNSW) is None
    # nor is a table grown into one that takes no index
    assert grow_dense(tmp_path / "after", tmp_path / "indexed", chunks(
        tmp_path / "c4", ids[:201], texts[:201]), embedding, None) is None
    # nor one written before tables kept their texts' digests
    VectorTable.create(tmp_path / "undigested", DENSE_TABLE, ids[:200],
                       open_dense(tmp_path / "indexed").rows()[1], HNSW)
    assert grow_dense(tmp_path / "after", tmp_path / "undigested", chunks(
        tmp_path / "c5", ids[:201], texts[:201]), embedding, HNSW) is None
    assert not embedding.calls  # nothing embedded before the judgement
    assert not list((tmp_path / "after").iterdir())  # nothing written: write_dense builds it


def test_an_earlier_table_that_cannot_be_read_leaves_nothing_and_is_built_anew(
        tmp_path: Path, embedding: Embedding) -> None:
    """Damage its listing did not show (a data file cut short): growing fails before
    anything is embedded, leaves nothing behind, and the table is then built as if there
    were no earlier one (the step says so and builds, ``StepContext.from_earlier``)."""
    texts = paragraphs(220)
    ids = [f"d{i}:0" for i in range(220)]
    write_dense(tmp_path / "before", chunks(tmp_path / "c0", ids[:200], texts[:200]),
                embedding, HNSW)
    for data in (tmp_path / "before" / "chunks.lance" / "data").iterdir():
        data.write_bytes(data.read_bytes()[:100])
    folder = chunks(tmp_path / "c1", ids, texts)
    (tmp_path / "after").mkdir()
    embedding.calls.clear()
    with pytest.raises(Exception):  # noqa: B017 - whatever LanceDB raises on a cut file
        grow_dense(tmp_path / "after", tmp_path / "before", folder, embedding, HNSW)
    assert not embedding.calls and not list((tmp_path / "after").iterdir())
    table = write_dense(tmp_path / "after", folder, embedding, HNSW)
    assert open_dense(tmp_path / "after").rows()[0] == ids
    assert table.search(table.rows()[1][210], 1)[0][0] == ids[210]
