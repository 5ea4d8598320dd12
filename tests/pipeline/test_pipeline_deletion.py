"""A document deleted from a documents folder leaves nothing behind that only it
supported: after the rerun no chunk, dense vector, entity, relationship, keyword,
sub-chunk, module or module summary rests on it, and what the other documents support
is still there."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kgrag.contents.bipartite import KEYWORD_TABLE, SUBCHUNK_TABLE, read_edges, read_subchunks
from kgrag.contents.chunks import read_chunks
from kgrag.contents.dense import open_dense
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.hierarchy import read_modules
from kgrag.contents.summaries import open_module_vectors, read_summaries
from kgrag.pipeline.runner import run_plan
from kgrag.store.vectors import VectorTable
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with

DOCUMENTS = {
    "zorbania.md": "# Zorbania\n\nZorbania is a kingdom ruled by Queen Melisande Varga. Its "
                   "capital Pelmora lies on the Ostrava River, near Lake Tirn.",
    "france.md": "# France\n\nParis is the capital of France. The Seine flows through Paris "
                 "and Rouen. Victor Hugo lived in Paris.",
    "italy.md": "# Italy\n\nRome is the capital of Italy. The Tiber flows through Rome. "
                "Florence lies on the Arno, and Dante Alighieri was born in Florence.",
    "spain.md": "# Spain\n\nMadrid is the capital of Spain. The Prado museum is in Madrid. "
                "Seville lies on the Guadalquivir.",
}
DELETED = "zorbania.md"


def build(spec: Path) -> dict[str, Path]:
    """Run the spec; step name → its artefact folder."""
    session = open_with(spec, RuleLLM())
    run_plan(session.plan, spec=session.spec, models=session.models,
             run_dir=session.run_dir, echo=lambda line: None)
    return {step.name: session.artefact(step.name) for step in session.plan.steps}


def only_on(table: pl.DataFrame, chunks: set[str]) -> set[str]:
    """The rows (by ``name`` or ``source``/``target``) all of whose chunks are ``chunks``."""
    key = "name" if "name" in table.columns else None
    rows = table.filter(pl.col("source_chunk_ids").list.eval(
        pl.element().is_in(list(chunks))).list.all())
    if key:
        return set(rows["name"])
    return set(zip(rows["source"], rows["target"]))


def test_a_deleted_document_leaves_nothing_only_it_supported(project):
    folder = project / "docs"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text)
    spec = write_spec(
        project, corpus={"dataset": "documents", "path": "../docs"},
        chunking={"size": 32, "overlap": 4}, extraction={"method": "nlp"},
        graphs=[{"name": "kg", "kind": "entities"},
                {"name": "kw", "kind": "bipartite", "tau": 1},
                {"name": "h", "kind": "hierarchy", "summaries": "extractive",
                 "gate_judge": "similarity"}],
        query=[{"name": "dense", "strategy": "naive", "budget_tokens": 100}])
    before = build(spec)
    chunks = read_chunks(before["chunks"])
    deleted = set(chunks.filter(pl.col("file") == DELETED)["chunk_id"])
    assert deleted
    gone_entities = only_on(read_entities(before["extract.kg"]), deleted)
    gone_relationships = only_on(read_relationships(before["extract.kg"]), deleted)
    assert gone_entities and gone_relationships  # the deletion has something to remove
    kept_entities = set(read_entities(before["extract.kg"])["name"]) - gone_entities

    (folder / DELETED).unlink()
    after = build(spec)
    chunks = read_chunks(after["chunks"])
    ids = set(chunks["chunk_id"])
    assert DELETED not in set(chunks["file"]) and not ids & deleted
    assert set(open_dense(after["dense"]).matrix()[0]) == ids
    for folder_ in (after["extract.kg"], after["hierarchy.h"]):
        entities, relationships = read_entities(folder_), read_relationships(folder_)
        for table in (entities, relationships):
            assert set(table["source_chunk_ids"].explode().drop_nulls()) <= ids
    entities = read_entities(after["extract.kg"])
    assert not set(entities["name"]) & gone_entities
    assert kept_entities <= set(entities["name"])  # the others' entities all stay
    relationships = read_relationships(after["extract.kg"])
    assert not set(zip(relationships["source"], relationships["target"])) & gone_relationships
    subchunks = read_subchunks(after["bipartite.kw"])
    assert set(subchunks["parent_chunk_id"]) <= ids
    edges = read_edges(after["bipartite.kw"])
    assert set(edges["subchunk_id"]) <= set(subchunks["chunk_id"])
    assert set(VectorTable.open(after["bipartite.kw"], SUBCHUNK_TABLE).matrix()[0]) == set(
        subchunks["chunk_id"])
    assert set(VectorTable.open(after["bipartite.kw"], KEYWORD_TABLE).matrix()[0]) == set(
        edges["keyword"])
    assert "zorbania" not in {k.lower() for k in edges["keyword"]}
    hierarchy_names = set(read_entities(after["hierarchy.h"])["name"])
    modules = read_modules(after["hierarchy.h"])
    assert set(modules["entities"].explode().drop_nulls()) <= hierarchy_names
    summaries = read_summaries(after["summaries.h"])
    assert set(summaries["module_id"]) <= set(modules["module_id"])
    assert not any("Zorbania" in text or "Pelmora" in text for text in summaries["text"])
    if summaries.height:
        assert set(open_module_vectors(after["summaries.h"]).matrix()[0]) == set(
            summaries["module_id"])
