"""A graph written for the tools people open graphs in: GraphML (Gephi, Cytoscape,
networkx, igraph), node-link JSON (networkx, d3) and two CSV tables (Gephi's and
Cytoscape's spreadsheet imports).

Attributes may be lists (an entity's chunk ids); JSON keeps them, GraphML and CSV
have only scalar values, so there they are joined with ``LIST_SEPARATOR``. An
attribute a node or edge lacks is left out rather than written empty.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx

LIST_SEPARATOR = "; "
NODES_CSV = "nodes.csv"
EDGES_CSV = "edges.csv"


def _scalar(value: Any) -> Any:
    return LIST_SEPARATOR.join(map(str, value)) if isinstance(value, (list, tuple)) else value


def _scalars(attributes: dict[str, Any]) -> dict[str, Any]:
    return {key: _scalar(value) for key, value in attributes.items()}


def write_graphml(graph: nx.MultiDiGraph, path: Path) -> list[Path]:
    flat = nx.MultiDiGraph()
    flat.add_nodes_from((node, _scalars(data)) for node, data in graph.nodes(data=True))
    flat.add_edges_from((a, b, key, _scalars(data))
                        for a, b, key, data in graph.edges(keys=True, data=True))
    nx.write_graphml(flat, path)
    return [path]


def write_json(graph: nx.MultiDiGraph, path: Path) -> list[Path]:
    data = nx.node_link_data(graph, edges="edges")
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return [path]


def write_csv(graph: nx.MultiDiGraph, folder: Path) -> list[Path]:
    """``nodes.csv`` (``Id``, then every node attribute) and ``edges.csv`` (``Source``,
    ``Target``, ``Type`` directed, then every edge attribute) in ``folder``: the column
    names Gephi's spreadsheet import recognises."""
    folder.mkdir(parents=True, exist_ok=True)
    nodes = [{"Id": node, **_scalars(data)} for node, data in graph.nodes(data=True)]
    edges = [{"Source": a, "Target": b, "Type": "Directed", **_scalars(data)}
             for a, b, data in graph.edges(data=True)]
    written = []
    for name, rows, first in ((NODES_CSV, nodes, ["Id"]),
                              (EDGES_CSV, edges, ["Source", "Target", "Type"])):
        columns = list(dict.fromkeys([*first, *(key for row in rows for key in row)]))
        with open(folder / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(rows)
        written.append(folder / name)
    return written


# format → writer; csv writes a folder, the others one file
FORMATS: dict[str, Callable[[nx.MultiDiGraph, Path], list[Path]]] = {
    "graphml": write_graphml, "json": write_json, "csv": write_csv}
