"""A graph build of a spec as one networkx graph, for ``kgrag graph`` to write out.

Every build's graph lives in its artefacts as tables (``kgrag.contents``): entities and
relationships, keywords and sub-chunks, modules and gates, a KGQA corpus's triples.
Here they become one directed multigraph whose nodes and edges carry a ``kind``, so a
user filters them in Gephi or Cytoscape as they please:

| build | nodes | edges |
|---|---|---|
| ``entities``, ``skeleton`` | ``entity``, ``chunk`` | ``relationship`` (source → target), ``mention`` (entity → chunk it was extracted from) |
| ``hierarchy`` | the same, and ``module`` | the same, and ``contains`` (module → child module or, for a leaf module, its entities), ``gate`` |
| ``bipartite`` | ``keyword``, ``subchunk`` | ``keyword`` (keyword → sub-chunk) |
| ``kg`` (a KGQA corpus) | ``entity`` | ``triple`` (head → tail, its ``relation``) |

Chunk and sub-chunk nodes carry where their text came from (document, title, and for a
documents folder its file, page and heading), so the graph is also the chunk → source
map. Node ids are ``<kind>:<name>``, so an entity never collides with a chunk or a
keyword; ``label`` holds the name as shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from kgrag.contents.bipartite import read_edges, read_keywords, read_subchunks
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_kg
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.gates import read_gates
from kgrag.contents.hierarchy import read_modules
from kgrag.contents.summaries import read_summaries
from kgrag.corpus.sources import SOURCE_COLUMNS
from kgrag.declarations import step_name
from kgrag.errors import KgragError
from kgrag.pipeline.graph_kinds import GRAPH_KINDS
from kgrag.pipeline.plan import Plan

KG = "kg"  # the build name and kind of a KGQA corpus's knowledge graph
# columns of the entity and relationship tables that are a search's rendering of a row
# (its text and token count), or a second name of ``source_chunk_ids``
RENDERED = frozenset({"row", "row_tokens", "text", "tokens", "chunk_ids"})
CHUNK_COLUMNS = ["chunk_id", "doc_id", "title"]

FolderOf = Callable[[str], Path]  # a step's name → its artefact folder


@dataclass(frozen=True)
class GraphBuild:
    """One graph of a spec: a graph build variant's label and kind, or ``kg``; the steps
    whose artefacts hold it."""

    name: str
    kind: str
    steps: tuple[str, ...]


def graph_builds(plan: Plan, dataset: str) -> list[GraphBuild]:
    """The spec's graph builds in spec order, then a KGQA corpus's knowledge graph."""
    builds = [GraphBuild(b["graph"], b["kind"], tuple(b["steps"])) for b in plan.builds]
    return builds + ([GraphBuild(KG, KG, ("corpus",))] if dataset == "kgqa" else [])


def chosen_build(builds: list[GraphBuild], name: str | None, spec: str) -> GraphBuild:
    """The build ``name`` names, or the first; an unknown name lists the known ones."""
    if not builds:
        raise KgragError(f"{spec} has no graph build (graphs:) and no knowledge graph; add a "
                         "build such as {name: entities, kind: entities}")
    if name is None:
        return builds[0]
    for build in builds:
        if build.name == name:
            return build
    raise KgragError(f"no graph build {name!r} in {spec}; choose from: "
                     f"{', '.join(b.name for b in builds)}")


def build_network(build: GraphBuild, folder_of: FolderOf) -> nx.MultiDiGraph:
    """The build's graph, every node and edge of it, read from its built artefacts."""
    return NETWORKS[build.kind](build, folder_of)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A table row as attributes: no None, no rendered text, chunk ids as ``chunk_ids``."""
    return {("chunk_ids" if key == "source_chunk_ids" else key): value
            for key, value in row.items() if key not in RENDERED and value is not None}


def _chunks(graph: nx.MultiDiGraph, folder: Path, chunk_ids: set[str], kind: str = "chunk",
            parents: dict[str, str] | None = None) -> None:
    """Nodes for ``chunk_ids`` with where each came from; sub-chunks (``parents``: id →
    its chunk's id) carry their chunk's source."""
    table = read_chunks(folder)
    columns = [c for c in (*CHUNK_COLUMNS, *SOURCE_COLUMNS) if c in table.columns]
    source = {row["chunk_id"]: row for row in table.select(columns).iter_rows(named=True)}
    for chunk_id in sorted(chunk_ids):
        parent = (parents or {}).get(chunk_id, chunk_id)
        row = {k: v for k, v in source[parent].items() if k != "chunk_id" and v is not None}
        graph.add_node(f"{kind}:{chunk_id}", kind=kind, label=chunk_id, **row,
                       **({"chunk_id": parent} if parents else {}))


def _entities(graph: nx.MultiDiGraph, folder: Path, chunks: Path) -> None:
    """Entity nodes, relationship edges, and mention edges to the chunks named."""
    mentioned: set[str] = set()
    for row in read_entities(folder).iter_rows(named=True):
        attributes = _row(row)
        name = attributes.pop("name")
        graph.add_node(f"entity:{name}", kind="entity", label=name, **attributes)
        for chunk_id in attributes.get("chunk_ids", []):
            graph.add_edge(f"entity:{name}", f"chunk:{chunk_id}", kind="mention")
            mentioned.add(chunk_id)
    for row in read_relationships(folder).iter_rows(named=True):
        attributes = _row(row)
        source, target = attributes.pop("source"), attributes.pop("target")
        graph.add_edge(f"entity:{source}", f"entity:{target}", kind="relationship",
                       **attributes)
    _chunks(graph, chunks, mentioned)


def _entity_network(build: GraphBuild, folder_of: FolderOf) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph(build=build.name, kind=build.kind)
    artefact = step_name(GRAPH_KINDS[build.kind].view.artefact, build.name)
    _entities(graph, folder_of(artefact), folder_of("chunks"))
    return graph


def _hierarchy_network(build: GraphBuild, folder_of: FolderOf) -> nx.MultiDiGraph:
    """The entity graph with its module tree: titles and summaries from the summary step,
    causal gates from the gate step."""
    graph = _entity_network(build, folder_of)
    summaries = read_summaries(folder_of(step_name("summaries", build.name)))
    written = {row["module_id"]: row for row in summaries.select(
        "module_id", "title", "summary").iter_rows(named=True)}
    for module_id, level, parent, children, members in read_modules(
            folder_of(step_name("hierarchy", build.name))).iter_rows():
        node = f"module:{module_id}"
        about = written.get(module_id, {})
        graph.add_node(node, kind="module", label=about.get("title") or module_id,
                       module_id=module_id, level=level, size=len(members),
                       **({"summary": about["summary"]} if about.get("summary") else {}))
        for child in children:
            graph.add_edge(node, f"module:{child}", kind="contains")
        if not children:
            for member in members:
                graph.add_edge(node, f"entity:{member}", kind="contains")
    for a, b in read_gates(folder_of(step_name("gates", build.name))):
        graph.add_edge(f"module:{a}", f"module:{b}", kind="gate")
    return graph


def _bipartite_network(build: GraphBuild, folder_of: FolderOf) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph(build=build.name, kind=build.kind)
    folder = folder_of(step_name("bipartite", build.name))
    for keyword, count in read_keywords(folder).iter_rows():
        graph.add_node(f"keyword:{keyword}", kind="keyword", label=keyword, n_subchunks=count)
    parents = dict(read_subchunks(folder, ["chunk_id", "parent_chunk_id"]).iter_rows())
    _chunks(graph, folder_of("chunks"), set(parents), "subchunk", parents)
    for keyword, subchunk in read_edges(folder).iter_rows():
        graph.add_edge(f"keyword:{keyword}", f"subchunk:{subchunk}", kind="keyword")
    return graph


def _kg_network(build: GraphBuild, folder_of: FolderOf) -> nx.MultiDiGraph:
    """A KGQA corpus's knowledge graph: its entities, each triple an edge; an entity that
    is a question's topic lists those questions."""
    graph = nx.MultiDiGraph(build=build.name, kind=build.kind)
    triples, topics = read_kg(folder_of("corpus"))
    asked: dict[str, list[str]] = {}
    for question_id, entity in topics.iter_rows():
        asked.setdefault(entity, []).append(question_id)
    for entity in sorted(set(triples["head"]) | set(triples["tail"])):
        graph.add_node(f"entity:{entity}", kind="entity", label=entity,
                       **({"topic_of": asked[entity]} if entity in asked else {}))
    for triple_id, head, relation, tail in triples.select(
            "triple_id", "head", "relation", "tail").iter_rows():
        graph.add_edge(f"entity:{head}", f"entity:{tail}", kind="triple", relation=relation,
                       triple_id=triple_id)
    return graph


# graph kind (``GRAPH_KINDS``, and ``kg``) → its network
NETWORKS: dict[str, Callable[[GraphBuild, FolderOf], nx.MultiDiGraph]] = {
    "entities": _entity_network, "skeleton": _entity_network,
    "hierarchy": _hierarchy_network, "bipartite": _bipartite_network, KG: _kg_network}


def counts(graph: nx.MultiDiGraph, what: str = "nodes") -> dict[str, int]:
    """Nodes (or edges) per kind, most first: the line ``kgrag graph`` prints."""
    items = graph.nodes(data="kind") if what == "nodes" else graph.edges(data="kind")
    return dict(Counter(item[-1] for item in items).most_common())
