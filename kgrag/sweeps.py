"""Sweeps: a parameter declared with ``sweep=True`` may hold a list, and the entry then runs
once per value (per combination, for several lists), each variant named after its values.

Compile expands graphs and query entries with these; the spec's checks expand them the
same way to check every variant; the report groups a sweep's rows back by its labels.
"""

from __future__ import annotations

import itertools

from kgrag.declarations import Config, Param


def variants(item: Config, keys: tuple[str, ...]) -> list[tuple[Config, Config]]:
    """(swept values, concrete config) for every combination of the list-valued ``keys``."""
    swept = [k for k in keys if isinstance(item.get(k), list)]
    combos = itertools.product(*(item[k] for k in swept))
    return [(dict(zip(swept, c)), {**item, **dict(zip(swept, c))}) for c in combos]


def label(name: str, chosen: Config) -> str:
    """A sweep variant's name: ``<name>@key=value,…`` (no brackets: they are glob
    characters to parquet readers)."""
    return name + (f"@{','.join(f'{k}={v}' for k, v in chosen.items())}" if chosen else "")


def sweep_keys(params: tuple[Param, ...]) -> tuple[str, ...]:
    """The parameters among ``params`` that take a list of values to sweep."""
    return tuple(p.name for p in params if p.sweep)
