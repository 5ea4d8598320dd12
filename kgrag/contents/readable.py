"""Whether every file of an artefact can still be read, for a folder with no listing.

An artefact's listing (``kgrag.pipeline.integrity``) is what finds a file damaged since
the artefact was built. A folder whose listing is gone (deleted by hand, or by a sync
tool) has nothing to compare with, and listing it as it stands would write the damage
into the record and make it permanent. So such a folder is read the way its readers
read it: every table read whole, every vector table opened and scanned, every graph and
JSON file parsed, every weights archive checked against its own checksums. What fails
here would fail a strategy, a query or the report later, far from the cause.

What reading cannot find: a file deleted outright (nothing says it was there), and
bytes changed in place where the format keeps no checksum and the value still decodes.
The listing written after this check catches both from then on.
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import polars as pl

LANCE_SUFFIX = ".lance"  # a LanceDB table is a folder of this name in its database folder


def unreadable(folder: Path) -> str | None:
    """The first file (or vector table) under ``folder`` that cannot be read whole, with
    why, or None when all of them read."""
    for name, path, read in _readers(folder):
        try:
            read(path)
        except Exception as exc:  # noqa: BLE001 - any failure to read is the finding
            return f"{name} cannot be read ({type(exc).__name__}: {_first_line(exc)})"
    return None


def _readers(folder: Path) -> Iterator[tuple[str, Path, Callable[[Path], object]]]:
    """Each file, or vector table, with the reader that checks it, in path order."""
    tables = [p for p in folder.rglob(f"*{LANCE_SUFFIX}") if p.is_dir()]
    files = [p for p in folder.rglob("*")
             if p.is_file() and not any(table in p.parents for table in tables)]
    found = [(t, _scan_table) for t in tables] + [(p, READERS.get(p.suffix, _read_bytes))
                                                  for p in files]
    for path, read in sorted(found, key=lambda pair: pair[0]):
        yield path.relative_to(folder).as_posix(), path, read


def _scan_table(table: Path) -> None:
    """Open the table and read every row: a data file gone or cut short fails here. A
    table with an ANN index (``kgrag.store.vectors``) also answers one search through it,
    which opens the index's files."""
    import lancedb  # imported where a table is opened, as in kgrag.store.vectors
    from lancedb.query import LanceVectorQueryBuilder

    rows = lancedb.connect(str(table.parent)).open_table(table.name[:-len(LANCE_SUFFIX)])
    scanned = rows.to_arrow()
    if scanned.num_rows != rows.count_rows():
        raise ValueError(f"{scanned.num_rows} rows read, {rows.count_rows()} recorded")
    if scanned.num_rows and rows.list_indices():
        first = scanned.column("vector")[0].values.to_numpy()
        query = rows.search(first, query_type="vector")
        assert isinstance(query, LanceVectorQueryBuilder), "a vector query builds a vector search"
        query.distance_type("cosine").limit(1).to_arrow()


def _read_parquet(path: Path) -> None:
    pl.read_parquet(path)


def _read_json(path: Path) -> None:
    json.loads(path.read_text(encoding="utf-8"))


def _read_xml(path: Path) -> None:
    ElementTree.parse(path)


def _test_zip(path: Path) -> None:
    """torch's weights files are zip archives: every member is checked against its CRC."""
    with zipfile.ZipFile(path) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise ValueError(f"member {bad} fails its CRC")


def _check_safetensors(path: Path) -> None:
    """A safetensors file is a JSON header and the tensors' bytes; it keeps no checksum,
    but its header says where every tensor ends, so a file cut short is found."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"),
              default=0)
    if path.stat().st_size != 8 + length + end:
        raise ValueError(f"{path.stat().st_size} bytes, its header describes {8 + length + end}")


def _map_npy(path: Path) -> None:
    """A NumPy file (a dense artefact's matrix) keeps no checksum, but its header gives
    its shape: a file cut short does not map. Then its bytes are read through."""
    np.load(path, mmap_mode="r")
    _read_bytes(path)


def _read_bytes(path: Path) -> None:
    """A file of a kind nothing here parses: it can at least be opened and read through."""
    with open(path, "rb") as handle:
        while handle.read(2**20):
            pass


def _first_line(exc: Exception, limit: int = 160) -> str:
    """The error's first line, cut short: LanceDB's messages go on with Rust source paths."""
    lines = str(exc).strip().splitlines()
    line = lines[0] if lines else "no detail"
    return line if len(line) <= limit else line[:limit] + "…"


READERS: dict[str, Callable[[Path], None]] = {
    ".parquet": _read_parquet, ".json": _read_json, ".graphml": _read_xml,
    ".pt": _test_zip, ".safetensors": _check_safetensors, ".npy": _map_npy,
}
