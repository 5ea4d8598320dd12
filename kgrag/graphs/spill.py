"""Rows kept on disk, in parts by the range of one string column, so that a table too
large for memory can be grouped a part at a time and still come out in sorted order.

The merge of an extraction (``kgrag.graphs.merge``) groups members by name, and its
tables are sorted by name; at a million chunks the members alone would not fit in
memory. A ``RangeSpill`` routes each batch of rows, as it arrives, to the part whose
range holds its key (``bounds``: the first key of every part but the first), appending
it to that part's Parquet file. Every row of one key lands in one part, and the parts,
read in turn, cover the keys in order: a part grouped and sorted by its key gives the
part of the sorted table that follows the previous one.

``bounds_of`` chooses the bounds from a sample of keys, so that the parts hold about
equal rows where the sample is like the rest; a poor sample makes the parts uneven, never
the result different.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl


def bounds_of(sample: pl.Series, parts: int) -> pl.Series:
    """The first key of each of ``parts`` ranges after the first, cut at equal shares of
    the sorted ``sample``: at most ``parts - 1`` distinct keys, sorted."""
    keys = sample.drop_nulls().sort()
    if parts <= 1 or keys.is_empty():
        return pl.Series(dtype=pl.String)
    cuts = {keys[len(keys) * i // parts] for i in range(1, parts)}
    return pl.Series(sorted(cuts), dtype=pl.String)


class Appender:
    """One Parquet file of ``schema``'s rows, written a frame at a time (each a row group
    or more); closed without a frame, it holds no row but the schema."""

    def __init__(self, path: Path, schema: dict[str, pl.DataType]) -> None:
        import pyarrow.parquet as pq  # imported where a spill is written, not by every command

        self.path, self.schema, self.rows = path, schema, 0
        self._writer: Any = pq.ParquetWriter(path, pl.DataFrame(schema=schema).to_arrow().schema,
                                             compression="zstd")  # polars' own default

    def write(self, rows: pl.DataFrame) -> None:
        if not rows.is_empty():
            self._writer.write_table(rows.select(list(self.schema))
                                     .cast(pl.Schema(self.schema)).to_arrow())
            self.rows += rows.height

    def close(self) -> None:
        self._writer.close()


class RangeSpill:
    """Rows of ``schema`` in Parquet files under ``folder``, one per range of ``column``
    (``bounds_of``), appended batch by batch and read back a part at a time."""

    def __init__(self, folder: Path, schema: dict[str, pl.DataType], column: str,
                 bounds: pl.Series) -> None:
        self.folder, self.schema, self.column, self.bounds = folder, schema, column, bounds
        self._parts: dict[int, Appender] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def add(self, rows: pl.DataFrame) -> None:
        """Appends ``rows`` (with the spill's columns), each to the part of its key."""
        if rows.is_empty():
            return
        part = self.bounds.search_sorted(rows.get_column(self.column), side="right")
        for (index,), chunk in rows.with_columns(part=part).partition_by(
                "part", as_dict=True, include_key=False).items():
            index = int(index)
            if index not in self._parts:
                self._parts[index] = Appender(self.folder / f"part-{index:05d}.parquet",
                                              self.schema)
            self._parts[index].write(chunk)

    def parts(self) -> Iterator[pl.DataFrame]:
        """Each part's rows, in the order of their ranges, each part's as appended; parts
        without a row are left out. Closes the files, and removes each once read: nothing
        is added after, and the disk holds what is left to read."""
        for appender in self._parts.values():
            appender.close()
        for index in sorted(self._parts):
            path = self._parts[index].path
            rows = pl.read_parquet(path)
            path.unlink()
            yield rows
