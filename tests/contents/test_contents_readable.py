"""Reading an artefact through, file by file, the way its readers will: what a folder
without its listing must pass before it is listed (and trusted) again."""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import numpy as np
import polars as pl
import pytest

from kgrag.contents.readable import unreadable
from kgrag.store.vectors import VectorTable


def build(folder: Path) -> Path:
    """An artefact holding one file of every kind artefacts hold, all written for real."""
    folder.mkdir()
    pl.DataFrame({"chunk_id": [f"c{i}" for i in range(200)], "text": ["words"] * 200}
                 ).write_parquet(folder / "rows.parquet")
    vectors = np.random.default_rng(0).random((50, 8), dtype=np.float32)
    VectorTable.create(folder / "vectors", "chunks", [f"c{i}" for i in range(50)], vectors)
    graph = nx.Graph()
    graph.add_edge("Port Blair", "Andaman Islands", relation="capital of")
    nx.write_graphml(graph, folder / "graph.graphml")
    (folder / "build.json").write_text(json.dumps({"status": "ran"}))
    with zipfile.ZipFile(folder / "scorer.pt", "w") as archive:  # torch.save's layout
        archive.writestr("scorer/data.pkl", b"weights" * 100)
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header
                                               + bytes(16))
    (folder / "vocab.txt").write_text("port\nblair\n")
    np.save(folder / "matrix.npy", vectors)
    return folder


def cut(name: str, keep: float = 0.5) -> Callable[[Path], None]:
    def spoil(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[:int(len(data) * keep)])
    return spoil


def zero_middle(name: str) -> Callable[[Path], None]:
    """Bytes zeroed in the middle of the file; its size stays as it was."""
    def spoil(folder: Path) -> None:
        data = bytearray((folder / name).read_bytes())
        middle = len(data) // 2
        data[middle - 16:middle + 16] = bytes(32)
        (folder / name).write_bytes(bytes(data))
    return spoil


def delete_table_data(folder: Path) -> None:
    next((folder / "vectors" / "chunks.lance" / "data").glob("*.lance")).unlink()


def test_an_intact_artefact_reads_whole(tmp_path: Path) -> None:
    assert unreadable(build(tmp_path / "a")) is None


@pytest.mark.parametrize("spoil, named", [
    (cut("rows.parquet"), "rows.parquet"),
    (zero_middle("rows.parquet"), "rows.parquet"),
    (delete_table_data, "vectors/chunks.lance"),
    (cut("graph.graphml"), "graph.graphml"),
    (cut("build.json", 0.9), "build.json"),
    (zero_middle("scorer.pt"), "scorer.pt"),
    (cut("model.safetensors", 0.95), "model.safetensors"),
    (cut("matrix.npy", 0.9), "matrix.npy"),
])
def test_a_damaged_file_is_named_with_why_it_cannot_be_read(
        tmp_path: Path, spoil: Callable[[Path], None], named: str) -> None:
    folder = build(tmp_path / "a")
    spoil(folder)
    problem = unreadable(folder)
    assert problem is not None and problem.startswith(f"{named} cannot be read (")
