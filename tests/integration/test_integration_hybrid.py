"""Hybrid extraction with the real SmolLM2 on a few MuSiQue chunks: every LLM triple joins
two entities spaCy found, nothing of the nlp extraction is lost, a rerun replays."""

from __future__ import annotations

import polars as pl
import pytest

from kgrag import api
from kgrag.contents.entities import ENTITIES_FILE, RELATIONSHIPS_FILE
from tests.conftest import write_spec


def hybrid_spec(project, name: str, method: str):
    return write_spec(
        project, name,
        corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
        extraction={"method": method, "model": "smollm2-135m", "prompt": "chat"},
        graphs=[{"name": "skel", "kind": "skeleton", "beta": 0.15}],  # 4 of 21 chunks
        query=[{"name": "local", "strategy": "ket", "skeleton": "skel", "theta": 1,
                "budget_tokens": 600}],
        answer={"questions": 0}, evaluate={"metrics": ["coverage"]})


def tables(project, name: str, result) -> tuple[pl.DataFrame, pl.DataFrame]:
    step = next(s for s in result.manifest.steps if s["name"] == "extract.skel")
    folder = project / "outputs" / name / step["artefact"]
    return pl.read_parquet(folder / ENTITIES_FILE), pl.read_parquet(folder / RELATIONSHIPS_FILE)


@pytest.mark.integration
def test_hybrid_triples_join_spacy_entities_and_keep_the_nlp_extraction(project):
    hybrid = api.run(hybrid_spec(project, "hybrid", "hybrid"), echo=lambda s: None)
    extract = next(s for s in hybrid.manifest.steps if s["name"] == "extract.skel")
    notes = extract["notes"]
    assert notes["core_chunks"] == 4 and notes["failed_chunks"] == []
    assert (notes["related_chunks"] + notes["unrelated_chunks"] + notes["no_entity_chunks"]
            + len(notes["relate_failed_chunks"])) == 4
    assert extract["llm"]["calls"] >= 4 - notes["no_entity_chunks"]
    entities, relationships = tables(project, "hybrid", hybrid)
    names = set(entities["name"])
    assert set(relationships["source"]) | set(relationships["target"]) <= names

    nlp = api.run(hybrid_spec(project, "nlp", "nlp"), echo=lambda s: None)
    nlp_entities, nlp_relationships = tables(project, "nlp", nlp)
    assert names == set(nlp_entities["name"])
    pairs = {frozenset(p) for p in relationships.select("source", "target").iter_rows()}
    assert {frozenset(p) for p in nlp_relationships.select("source", "target").iter_rows()
            } <= pairs
    assert notes["related_chunks"] >= 1 and relationships.height >= nlp_relationships.height

    again = api.run(hybrid_spec(project, "again", "hybrid"), echo=lambda s: None)
    assert sum(s["llm"]["calls"] for s in again.manifest.steps) == 0
