"""The ``gates`` artefact (HugRAG's step ``gates``): module pairs judged causally linked.

``gates.parquet`` has one row per gate: module ids ``a``, ``b`` and their levels.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

GATES_FILE = "gates.parquet"


def write_gates(folder: Path, gates: list[tuple[str, str]], level: Mapping[str, int]) -> None:
    pl.DataFrame({"a": [a for a, _ in gates], "b": [b for _, b in gates],
                  "level_a": [level[a] for a, _ in gates],
                  "level_b": [level[b] for _, b in gates]},
                 schema={"a": pl.String, "b": pl.String, "level_a": pl.Int64,
                         "level_b": pl.Int64}).write_parquet(folder / GATES_FILE)


def read_gates(folder: Path) -> list[tuple[str, str]]:
    return list(pl.read_parquet(folder / GATES_FILE).select("a", "b").iter_rows())
