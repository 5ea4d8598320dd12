"""``kgrag graph``: every graph build of a real (LLM-free) run written as GraphML, JSON
and CSV, read back by networkx and the csv module, holding every node and edge of the
build's tables; a build not built yet is built first; an unknown one lists the known."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.contents.bipartite import read_edges, read_keywords, read_subchunks
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_kg
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.gates import read_gates
from kgrag.contents.hierarchy import read_modules
from kgrag.pipeline.graph_export import NETWORKS
from kgrag.pipeline.graph_kinds import GRAPH_KINDS
from tests.conftest import SHARED_DATA, make_project, write_spec
from tests.pipeline.test_pipeline_reg import kgqa_lines

GRAPHS = [{"name": "ents", "kind": "entities"},
          {"name": "skel", "kind": "skeleton", "beta": 1.0, "relationship_vectors": False},
          {"name": "kw", "kind": "bipartite", "tau": 1},
          {"name": "hug", "kind": "hierarchy", "summaries": "extractive",
           "gate_judge": "similarity", "gate_min_similarity": 0.0,
           "gate_judge_similarity": 0.0, "max_cluster_size": 4}]


@pytest.fixture(scope="module")
def wiki(tmp_path_factory) -> Path:
    """A spec over the first 2Wiki question with paragraphs, every graph kind built with
    no LLM (nlp extraction, extractive summaries, similarity gates); nothing run yet."""
    project = make_project(tmp_path_factory.mktemp("graph") / "proj")
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        (project / "2wiki.jsonl").write_text(next(line for line in handle if '"context"' in line))
    return write_spec(project, "graphs", corpus={"dataset": "2wiki", "path": "../2wiki.jsonl"},
                      extraction={"method": "nlp"}, graphs=GRAPHS,
                      query=[{"name": "dense", "strategy": "naive", "budget_tokens": 300}],
                      answer={"questions": 0}, evaluate={"metrics": ["coverage"]})


def exported(spec: Path, build: str, fmt: str, out: Path, capsys) -> str:
    assert main(["graph", str(spec), build, "--format", fmt, "-o", str(out)]) == 0
    return capsys.readouterr().out


def kinds(graph: nx.MultiDiGraph, kind: str, what: str = "nodes") -> list:
    if what == "nodes":
        return [data for _, data in graph.nodes(data=True) if data["kind"] == kind]
    return [(a, b, data) for a, b, data in graph.edges(data=True) if data["kind"] == kind]


def test_every_graph_kind_has_a_network():
    assert set(NETWORKS) == {*GRAPH_KINDS, "kg"}


@pytest.mark.parametrize("build", ["ents", "skel", "hug"])
def test_graphml_holds_every_entity_relationship_and_mention(wiki, build, tmp_path, capsys):
    out = exported(wiki, build, "graphml", tmp_path / "g.graphml", capsys)
    graph = nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True)
    session = api.open_session(wiki)
    folder = session.artefact({"ents": "extract", "skel": "skeleton",
                               "hug": "hierarchy"}[build] + f".{build}")
    entities, relationships = read_entities(folder), read_relationships(folder)
    assert sorted(n["label"] for n in kinds(graph, "entity")) == sorted(entities["name"])
    assert Counter((a, b) for a, b, _ in kinds(graph, "relationship", "edges")) == Counter(
        (f"entity:{s}", f"entity:{t}") for s, t in relationships.select("source", "target")
        .iter_rows())
    assert len(kinds(graph, "mention", "edges")) == entities["source_chunk_ids"].list.len().sum()
    chunks = read_chunks(session.artefact("chunks"))
    titles = dict(zip(chunks["chunk_id"], chunks["title"]))
    assert {n["label"]: n["title"] for n in kinds(graph, "chunk")} == {
        c: titles[c] for ids in entities["source_chunk_ids"] for c in ids}
    if build != "hug":  # nothing else: the hierarchy adds its modules (next test)
        assert graph.number_of_nodes() == entities.height + len(kinds(graph, "chunk"))
        assert graph.number_of_edges() == relationships.height + len(
            kinds(graph, "mention", "edges"))
    some = entities.row(0, named=True)
    node = graph.nodes[f"entity:{some['name']}"]
    assert node["type"] == some["type"] and node["chunk_ids"] == "; ".join(some["source_chunk_ids"])
    assert f"graph {build}" in out and "entity" in out


def test_the_hierarchy_adds_its_modules_and_gates(wiki, tmp_path, capsys):
    exported(wiki, "hug", "graphml", tmp_path / "h.graphml", capsys)
    graph = nx.read_graphml(tmp_path / "h.graphml", force_multigraph=True)
    session = api.open_session(wiki)
    modules = read_modules(session.artefact("hierarchy.hug"))
    assert modules.height > 1, "the test needs a module tree"
    assert sorted(n["module_id"] for n in kinds(graph, "module")) == sorted(modules["module_id"])
    contains = Counter(a for a, _, _ in kinds(graph, "contains", "edges"))
    for module_id, children, members in modules.select("module_id", "children",
                                                       "entities").iter_rows():
        assert contains[f"module:{module_id}"] == len(children or members)
    gates = read_gates(session.artefact("gates.hug"))
    assert gates, "the test needs gates"
    assert sorted((a, b) for a, b, _ in kinds(graph, "gate", "edges")) == sorted(
        (f"module:{a}", f"module:{b}") for a, b in gates)


def test_the_bipartite_graph_as_csv_tables(wiki, tmp_path, capsys):
    out = exported(wiki, "kw", "csv", tmp_path / "kw", capsys)
    assert "wrote" in out and "nodes.csv" in out and "edges.csv" in out
    with open(tmp_path / "kw" / "nodes.csv", newline="") as handle:
        nodes = list(csv.DictReader(handle))
    with open(tmp_path / "kw" / "edges.csv", newline="") as handle:
        edges = list(csv.DictReader(handle))
    folder = api.open_session(wiki).artefact("bipartite.kw")
    keywords, subchunks = read_keywords(folder), read_subchunks(folder)
    assert sorted(n["label"] for n in nodes if n["kind"] == "keyword") == sorted(
        keywords["keyword"])
    sub = [n for n in nodes if n["kind"] == "subchunk"]
    assert sorted(n["label"] for n in sub) == sorted(subchunks["chunk_id"])
    assert all(n["title"] and n["chunk_id"] for n in sub)  # its chunk and that chunk's title
    assert sorted((e["Source"], e["Target"]) for e in edges) == sorted(
        (f"keyword:{k}", f"subchunk:{s}") for k, s in read_edges(folder).iter_rows())
    assert {e["Type"] for e in edges} == {"Directed"}


def test_a_kgqa_corpus_graph_as_node_link_json(tmp_path, capsys):
    project = make_project(tmp_path / "proj")
    (project / "kgqa.jsonl").write_text("".join(json.dumps(line) + "\n"
                                                for line in kgqa_lines()))
    spec = write_spec(project, "kgqa", corpus={"dataset": "kgqa", "path": "../kgqa.jsonl"},
                      query=[{"name": "cosine", "strategy": "triple_cosine",
                              "budget_tokens": 100}], answer={"questions": 0},
                      evaluate={"metrics": ["recall@5"]})
    out = exported(spec, "kg", "json", tmp_path / "kg.json", capsys)
    graph = nx.node_link_graph(json.loads((tmp_path / "kg.json").read_text()), edges="edges")
    triples, _ = read_kg(api.open_session(spec).artefact("corpus"))
    assert sorted((a, b, d["relation"]) for a, b, d in graph.edges(data=True)) == sorted(
        (f"entity:{h}", f"entity:{t}", r)
        for h, r, t in triples.select("head", "relation", "tail").iter_rows())
    assert graph.nodes["entity:Alice Moreau"]["topic_of"] == ["q0"]  # a list, in JSON
    assert "graph kg (kg)" in out


def test_a_build_not_built_is_built_first(project, tmp_path, capsys):
    spec = write_spec(project, extraction={"method": "nlp"},
                      graphs=[{"name": "first", "kind": "entities"}],
                      query=[{"name": "dense", "strategy": "naive", "budget_tokens": 300}],
                      answer={"questions": 0}, evaluate={"metrics": ["coverage"]})
    session = api.open_session(spec)
    assert not session.artefact("extract.first").exists()
    out = exported(spec, "first", "graphml", tmp_path / "g.graphml", capsys)
    assert "extract.first" in out and "ran in" in out  # built, as kgrag query builds
    assert session.artefact("extract.first").exists()
    manifest = (session.run_dir / "manifest.json").read_text()
    assert main(["graph", str(spec), "-o", str(tmp_path / "again.graphml")]) == 0  # the first
    assert "ran in" not in capsys.readouterr().out  # nothing to build: the manifest is kept
    assert (session.run_dir / "manifest.json").read_text() == manifest
    assert (tmp_path / "again.graphml").read_bytes() == (tmp_path / "g.graphml").read_bytes()


def test_an_unknown_build_lists_the_known_ones(wiki, tmp_path, capsys):
    assert main(["graph", str(wiki), "nope", "-o", str(tmp_path / "x.graphml")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("kgrag: error: no graph build 'nope' in graphs.yaml; choose from: "
                           "ents, skel, kw, hug")
    assert not (tmp_path / "x.graphml").exists()
