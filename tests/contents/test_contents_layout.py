"""The artefact layer: every file and table name as landed runs hold them, and the
write / read pairs that give back what was written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from kgrag.contents import (
    answers,
    bipartite,
    chunks,
    core,
    corpus,
    dense,
    entities,
    extraction,
    gates,
    hierarchy,
    metrics,
    retrieved,
    skeleton,
    summaries,
)
from kgrag.graphs.hierarchy import Hierarchy, Module


def test_file_and_table_names_are_those_of_landed_runs() -> None:
    # Renaming one strands every artefact folder built before: these are fixed.
    assert (corpus.DOCUMENTS, corpus.QUESTIONS, corpus.SENTENCES, corpus.TRIPLES) == (
        "documents.parquet", "questions.parquet", "sentences.parquet", "triples.parquet")
    assert (chunks.CHUNKS_FILE, chunks.DIGESTS_FILE, dense.DENSE_TABLE) == (
        "chunks.parquet", "document_digests.parquet", "chunks")
    assert (core.CORE, core.KNN_FILE) == ("core.parquet", "knn.parquet")
    assert (entities.ENTITIES_FILE, entities.RELATIONSHIPS_FILE, entities.ENTITY_TABLE) == (
        "entities.parquet", "relationships.parquet", "entities")
    assert (extraction.EXTRACTIONS, extraction.ENTITY_MEMBERS, extraction.RELATIONSHIP_MEMBERS) == (
        "extractions.parquet", "entity_members.parquet", "relationship_members.parquet")
    assert (skeleton.RELATIONSHIP_TABLE, skeleton.GRAPHML) == ("relationships",
                                                               "skeleton.graphml")
    assert (bipartite.SUBCHUNKS_FILE, bipartite.KEYWORDS_FILE, bipartite.EDGES_FILE,
            bipartite.KEYWORD_TABLE, bipartite.SUBCHUNK_TABLE) == (
        "subchunks.parquet", "keywords.parquet", "edges.parquet", "keywords", "subchunks")
    assert hierarchy.MODULES_FILE == "modules.parquet"
    assert (summaries.SUMMARIES_FILE, summaries.MODULE_TABLE) == ("summaries.parquet",
                                                                  "modules")
    assert gates.GATES_FILE == "gates.parquet"
    assert (retrieved.RETRIEVED, answers.ANSWERS, metrics.METRICS) == (
        "retrieved.parquet", "answers.parquet", "metrics.json")


def test_the_module_tree_and_the_gates_read_back_as_written(tmp_path: Path) -> None:
    tree = Hierarchy(modules=[Module("M1", 0, None, ("M2",), ("A", "B", "C")),
                              Module("M2", 1, "M1", (), ("A", "B"))],
                     unclustered=(), oversized=0)
    table = pl.DataFrame({"entity_id": ["E1", "E2"], "name": ["A", "B"]})
    links = pl.DataFrame({"source": ["A"], "target": ["B"]})
    hierarchy.write_hierarchy(tmp_path, table, links, tree, np.eye(2, dtype=np.float32))
    assert hierarchy.read_hierarchy(tmp_path).modules == tree.modules
    assert entities.read_entities(tmp_path).equals(table)
    assert entities.read_relationships(tmp_path, ["target"])["target"].to_list() == ["B"]
    assert entities.open_entity_vectors(tmp_path).matrix()[0] == ["E1", "E2"]
    gates.write_gates(tmp_path, [("M1", "M2")], {"M1": 0, "M2": 1})
    assert gates.read_gates(tmp_path) == [("M1", "M2")]


def test_core_flags_and_knn_edges_read_back_by_chunk_id(tmp_path: Path) -> None:
    ids = pl.Series("chunk_id", ["c1", "c2", "c3"])
    core.write_core(tmp_path, ids, np.array([0.5, 0.3, 0.2]), np.array([True, False, True]),
                    (np.array([0, 1]), np.array([1, 0])))
    assert core.read_core_ids(tmp_path).to_list() == ["c1", "c3"]
    assert core.read_knn(tmp_path).rows() == [("c1", "c2"), ("c2", "c1")]
