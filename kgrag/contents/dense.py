"""The ``dense`` artefact (step ``dense_index``): one vector per chunk, by ``chunk_id``,
with a digest of the text each vector embeds, and the same vectors, row-normalised, as a
NumPy file in the table's row order (``MATRIX_FILE``), which the strategies that score
chunks by their rows map rather than read (``dense_matrix``).

Both ways of making it go through the chunks a part at a time (``PART_ROWS``): the texts
of one part are embedded and appended to the table before the next part is read, so the
step holds one part's texts and vectors whatever the corpus's size. A rebuild over a
changed corpus (``grow_dense``) compares digests, embeds only the chunks whose text is
new and folds them into the earlier table's index.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kgrag.contents.chunks import chunk_frames, count_chunks
from kgrag.errors import KgragError
from kgrag.memory import give_back
from kgrag.progress import Progress
from kgrag.store.vectors import FOLD_SHARE, Part, VectorTable, unit_rows

DENSE_TABLE = "chunks"
# The table's vectors, row-normalised, in its row order: mapped by the strategies that
# read chunk rows (``ppr``'s search, HugRAG, ``knng``), so that only the rows a question
# reads are resident.
MATRIX_FILE = "chunks.f32.npy"
# Chunks embedded and appended at a time: about 45 MB of texts and 50 MB of 384-dimension
# vectors (with the embedder's own copies) at 1.4 KB of text a chunk.
PART_ROWS = 32_768

# texts to their unit vectors, ticking the step's progress once per text
Embed = Callable[[list[str], Progress], np.ndarray]


def digests(texts: list[str]) -> list[str]:
    """What tells a chunk's text from another's: 128 bits of BLAKE2b."""
    return [hashlib.blake2b(text.encode(), digest_size=16).hexdigest() for text in texts]


def write_dense(folder: Path, chunks: Path, embed: Embed,
                ann: dict[str, Any] | None = None) -> VectorTable:
    """The table of the chunks artefact ``chunks``, embedded a part at a time, with an
    ANN index where ``ann`` asks for one at its size."""
    report = Progress("embed", count_chunks(chunks), unit="text")
    parts = (Part(ids, _embedded(embed, texts, report), digests(texts))
             for ids, texts in _parts(chunks))
    table = VectorTable.write(folder, DENSE_TABLE, parts)
    report.close()
    return table.indexed(ann)


def grow_dense(folder: Path, earlier: Path, chunks: Path, embed: Embed,
               ann: dict[str, Any] | None) -> VectorTable | None:
    """``write_dense``'s table made from ``earlier``'s (a ``dense`` artefact of the same
    settings): its rows whose chunk is gone or whose text changed deleted, the new
    chunks embedded and folded into its index (``VectorTable.grow``). None, for
    ``write_dense`` to build it, where that would make no index, the earlier table has
    none or keeps no digests (a table written before they were kept), or more than
    ``FOLD_SHARE`` of the chunks are new. Only the new chunks' texts
    are held, at most ``FOLD_SHARE`` of them."""
    total = count_chunks(chunks) or 0
    before = VectorTable.open(earlier, DENSE_TABLE)
    stored = before.digests()
    if ann is None or total <= ann["min_rows"] or before.ann is None or stored is None:
        return None
    held = pl.from_arrow(stored)
    assert isinstance(held, pl.DataFrame), "a table reads as a frame"
    kept, new = [], []
    for ids, texts in _parts(chunks):
        part = pl.DataFrame({"id": ids, "digest": digests(texts), "text": texts},
                            schema={"id": pl.String, "digest": pl.String, "text": pl.String})
        kept.append(part.join(held, on=["id", "digest"], how="semi")["id"])
        new.append(part.join(held, on=["id", "digest"], how="anti"))
        if sum(frame.height for frame in new) > FOLD_SHARE * total:
            return None
    unchanged = pl.concat(kept)
    gone = held.filter(~pl.col("id").is_in(unchanged.implode()))["id"].to_list()
    added = pl.concat(new)
    report = Progress("embed", added.height, unit="text")

    def parts() -> Iterator[Part]:
        for start in range(0, added.height, PART_ROWS):
            rows = added.slice(start, PART_ROWS)
            texts = rows["text"].to_list()
            yield Part(rows["id"].to_list(), _embedded(embed, texts, report),
                       rows["digest"].to_list())

    table = VectorTable.grow(folder, DENSE_TABLE, earlier, gone, parts())
    report.close()
    return table


def _embedded(embed: Embed, texts: list[str], report: Progress) -> np.ndarray:
    """One part's vectors, and the memory its batches freed handed back (``give_back``):
    without it, the holes each part leaves in the heap stay resident, and the step grew by
    44 KB a chunk with the ``torch`` embedder, 11 KB with it."""
    vectors = embed(texts, report)
    give_back()
    return vectors


def _parts(chunks: Path) -> Iterator[tuple[list[str], list[str]]]:
    """The chunks' ids and texts, ``PART_ROWS`` at a time."""
    for frame in chunk_frames(chunks, ["chunk_id", "context"], PART_ROWS):
        yield frame["chunk_id"].to_list(), frame["context"].to_list()


def open_dense(folder: Path) -> VectorTable:
    return VectorTable.open(folder, DENSE_TABLE)


def write_matrix(folder: Path, table: VectorTable) -> None:
    """The table's vectors, row-normalised, into ``MATRIX_FILE``, ``READ_ROWS`` at a time."""
    matrix = np.lib.format.open_memmap(folder / MATRIX_FILE, mode="w+", dtype=np.float32,
                                       shape=(len(table), table.dim))
    done = 0
    for ids, values in table.batches():
        matrix[done:done + len(ids)] = values
        unit_rows(matrix[done:done + len(ids)])
        done += len(ids)
    matrix.flush()


def dense_matrix(folder: Path) -> tuple[list[str], np.ndarray]:
    """The chunk ids and their row-normalised vectors of the dense artefact ``folder``, the
    vectors mapped from ``MATRIX_FILE`` (read-only), for a reader of every row (a flat
    scan, a graph over all chunks): at 110,056 chunks the matrix read whole held 169 MB,
    and its read 180 MB more."""
    return open_dense(folder).ids(), np.load(folder / MATRIX_FILE, mmap_mode="r")


# Rows read at a time by a reader of most of the matrix (6 MB of 384-wide float32 rows);
# and past a 1/16 of the rows, reading them all costs less than reading them one by one.
BLOCK_ROWS = 4096
SPARSE_SHARE = 16


def dense_rows(folder: Path) -> tuple[list[str], MatrixRows]:
    """``dense_matrix`` for a reader of a few rows a question (``MatrixRows``)."""
    return open_dense(folder).ids(), MatrixRows(folder / MATRIX_FILE)


class MatrixRows:
    """The rows of a 2-D NumPy file read when asked for: what a search over an ANN index
    reads of the chunk matrix, a few hundred rows a question, each with one ``pread``.
    Mapped, every row read would stay resident with the pages the kernel maps around it:
    at 110,056 chunks, 74 questions of two ``ppr`` strategies left most of the 169 MB
    matrix resident. A walk that reaches most chunks (the power walk reaches every one)
    reads the file whole instead, ``BLOCK_ROWS`` at a time, and holds one block."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("rb")
        version = np.lib.format.read_magic(self.file)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, self.dtype = read_header(self.file)
        if len(shape) != 2 or fortran:
            raise KgragError(f"{path} is not a matrix in row order: shape {shape}")
        self.rows, self.width = int(shape[0]), int(shape[1])
        self.start = self.file.tell()
        self.row_bytes = self.width * self.dtype.itemsize

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, positions: np.ndarray | list[int]) -> np.ndarray:
        fd, size = self.file.fileno(), self.row_bytes
        read = b"".join(os.pread(fd, size, self.start + int(at) * size) for at in positions)
        return self._matrix(read, len(positions))

    def block(self, first: int, end: int) -> np.ndarray:
        """Rows ``first`` to ``end`` (excluded), with one read."""
        read = os.pread(self.file.fileno(), (end - first) * self.row_bytes,
                        self.start + first * self.row_bytes)
        return self._matrix(read, end - first)

    def _matrix(self, read: bytes, rows: int) -> np.ndarray:
        if len(read) != rows * self.row_bytes:  # the file cut short since it was opened
            raise KgragError(f"{self.file.name} holds fewer rows than its header says; "
                             "kgrag run finds the damage and builds the artefact again")
        return np.frombuffer(read, dtype=self.dtype).reshape(rows, self.width)

    def dot(self, positions: np.ndarray, vector: np.ndarray) -> np.ndarray:
        """``matrix[positions] @ vector``: the rows read one by one, or, for more than a
        ``1 / SPARSE_SHARE`` of them, the whole file block by block."""
        if len(positions) * SPARSE_SHARE <= self.rows:
            products: np.ndarray = self[positions] @ vector
            return products
        every = np.concatenate([self.block(first, min(first + BLOCK_ROWS, self.rows)) @ vector
                                for first in range(0, self.rows, BLOCK_ROWS)])
        return np.take(every, positions)
