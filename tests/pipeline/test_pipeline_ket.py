"""KET-RAG builds end to end on real MuSiQue paragraphs with the stand-in LLM: what each
graph build cost (metrics.json's ``builds``), calls proportional to β and shared
through the cache, relationship vectors, and the optional description summaries."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.contents.answers import read_citations
from kgrag.contents.bipartite import SUBCHUNKS_FILE
from kgrag.contents.entities import ENTITIES_FILE, ENTITY_TABLE, RELATIONSHIPS_FILE
from kgrag.contents.skeleton import RELATIONSHIP_TABLE
from kgrag.errors import KgragError
from kgrag.graphs.merge import DESCRIPTION_SEPARATOR
from kgrag.store.vectors import VectorTable
from tests.conftest import write_spec
from tests.standin import RuleLLM, run_with


def ket_spec(project: Path, name: str = "ket", metrics: tuple[str, ...] = ("coverage",),
             **skeleton) -> Path:
    graph = {"name": "skel", "kind": "skeleton", "beta": 0.2, **skeleton}
    return write_spec(
        project, name, corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
        graphs=[graph, {"name": "kw", "kind": "bipartite"}],
        query=[{"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
                "budget_tokens": 600}],
        answer={"questions": 0}, evaluate={"metrics": list(metrics)})


def artefact(project: Path, run: str, step: dict) -> Path:
    return project / "outputs" / run / step["artefact"]


def test_build_rows_report_what_each_graph_cost_when_it_was_built(project: Path) -> None:
    llm = RuleLLM()
    steps, _, builds = run_with(ket_spec(project), llm)
    by_graph = {b["graph"]: b for b in builds}
    assert set(by_graph) == {"skel", "kw"}
    skel, core = by_graph["skel"], steps["core.skel"]["notes"]
    assert core["core_chunks"] == math.ceil(0.2 * core["chunks"])
    # one extraction request per core chunk, all paid for by this build
    assert skel["llm_requests"] == skel["llm_calls"] == core["core_chunks"]
    assert llm.calls == ["extract"] * core["core_chunks"]
    assert skel["cache_hits"] == 0 and skel["tokens_in"] > 0 and skel["tokens_out"] > 0
    assert skel["core_chunks"] == core["core_chunks"] and skel["parsed_first_try"] == 1.0
    assert skel["failed_chunks"] == 0 and skel["entities"] == steps["skeleton.skel"]["notes"][
        "entities"]
    assert skel["wall_s"] is not None and skel["wall_s"] >= 0 and skel["embeddings"] > 0
    assert by_graph["kw"]["llm_requests"] == 0 and by_graph["kw"]["keywords"] > 0

    # a rerun that re-evaluates reuses every build, and still reports what it cost
    again, _, rebuilt = run_with(ket_spec(project, metrics=("coverage", "recall@5")), RuleLLM())
    assert again["evaluate"]["status"] == "ran" and again["extract.skel"]["status"] == "reused"
    assert rebuilt == builds


def test_calls_grow_with_beta_and_other_specs_replay_them_from_the_cache(project: Path) -> None:
    _, _, small = run_with(ket_spec(project, "small", beta=0.2), RuleLLM())
    llm = RuleLLM()
    steps, _, large = run_with(ket_spec(project, "large", beta=0.4), llm)
    small_skel = next(b for b in small if b["graph"] == "skel")
    large_skel = next(b for b in large if b["graph"] == "skel")
    chunks = steps["core.skel"]["notes"]["chunks"]
    assert small_skel["llm_requests"] == math.ceil(0.2 * chunks)
    assert large_skel["llm_requests"] == math.ceil(0.4 * chunks)
    # PageRank's core sets are nested: the larger β pays only for the chunks it adds
    assert large_skel["cache_hits"] == small_skel["llm_requests"]
    assert large_skel["llm_calls"] == llm.calls.count("extract") == \
        large_skel["llm_requests"] - small_skel["llm_requests"]


def test_the_skeleton_stores_relationship_vectors(project: Path) -> None:
    steps, _, _ = run_with(ket_spec(project), RuleLLM())
    folder = artefact(project, "ket", steps["skeleton.skel"])
    relationships = pl.read_parquet(folder / RELATIONSHIPS_FILE)
    assert relationships.height > 0
    ids, matrix = VectorTable.open(folder, RELATIONSHIP_TABLE).matrix()
    assert sorted(ids) == sorted(relationships["relationship_id"].to_list())
    assert matrix.shape == (relationships.height, 384)


def test_relationship_vectors_can_be_left_out_and_retrieval_does_not_need_them(
        project: Path) -> None:
    steps, metrics, _ = run_with(ket_spec(project, relationship_vectors=False), RuleLLM())
    folder = artefact(project, "ket", steps["skeleton.skel"])
    assert pl.read_parquet(folder / RELATIONSHIPS_FILE).height > 0
    with pytest.raises(KgragError, match="no vector table"):
        VectorTable.open(folder, RELATIONSHIP_TABLE)
    assert len(VectorTable.open(folder, ENTITY_TABLE)) > 0
    embedded_steps, embedded, _ = run_with(ket_spec(project, "embedded"), RuleLLM())
    assert (embedded_steps["skeleton.skel"]["fingerprint"]
            != steps["skeleton.skel"]["fingerprint"])
    assert metrics["ket"]["coverage"] == embedded["ket"]["coverage"]


def test_descriptions_from_several_chunks_are_summarised_on_request(project: Path) -> None:
    plain_steps, _, _ = run_with(ket_spec(project, "plain", beta=1.0), RuleLLM())
    merged = pl.read_parquet(artefact(project, "plain", plain_steps["extract.skel"])
                             / ENTITIES_FILE)
    several = merged.filter(pl.col("description").str.contains(DESCRIPTION_SEPARATOR,
                                                                literal=True))
    assert several.height > 0  # the stand-in describes an entity per chunk

    llm = RuleLLM()
    steps, _, builds = run_with(ket_spec(project, "summed", beta=1.0,
                                         summarise_descriptions=True), llm)
    notes = steps["skeleton.skel"]["notes"]
    assert notes["summarised_descriptions"] == llm.calls.count("description") >= several.height
    assert notes["summary_fallbacks"] == 0 and "extract" not in llm.calls  # extraction reused
    entities = pl.read_parquet(artefact(project, "summed", steps["skeleton.skel"])
                               / ENTITIES_FILE)
    described = dict(entities.select("name", "description").iter_rows())
    for name in several["name"]:
        assert described[name] == f"summary of {name}"
    single = merged.filter(~pl.col("name").is_in(several["name"].implode()))
    for name, description in single.select("name", "description").iter_rows():
        assert described[name] == description
    assert next(b for b in builds if b["graph"] == "skel")["llm_calls"] == \
        notes["summarised_descriptions"]


def test_a_summary_that_never_parses_keeps_the_joined_descriptions(project: Path) -> None:
    steps, _, _ = run_with(ket_spec(project, beta=1.0, summarise_descriptions=True),
                           RuleLLM(summaries_parse=False))
    notes = steps["skeleton.skel"]["notes"]
    assert notes["summary_fallbacks"] == notes["summarised_descriptions"] > 0
    entities = pl.read_parquet(artefact(project, "ket", steps["skeleton.skel"]) / ENTITIES_FILE)
    assert entities["description"].str.contains(DESCRIPTION_SEPARATOR, literal=True).any()


def test_description_summaries_make_the_dry_run_bound_unknown(project: Path) -> None:
    session = api.open_session(ket_spec(project, summarise_descriptions=True))
    bounds = {p.step.name: p.max_llm_calls for p in api.dry_run(session)}
    assert bounds["skeleton.skel"] is None
    plain = api.open_session(ket_spec(project, "plain"))
    assert {p.step.name: p.max_llm_calls for p in api.dry_run(plain)}["skeleton.skel"] == 0


def test_sub_chunks_render_like_their_chunks_when_titles_are_off(project: Path) -> None:
    """With ``chunking.title: false`` no "# <title>" line reaches a sub-chunk's embedded
    text or context (it did: the bipartite step always rendered the title)."""
    query = [{"name": "keyword", "strategy": "ket", "bipartite": "kw", "theta": 0,
              "budget_tokens": 600}]
    sections = {"corpus": {"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
                "graphs": [{"name": "kw", "kind": "bipartite"}], "query": query,
                "answer": {"questions": 0}, "evaluate": {"metrics": ["coverage"]}}
    untitled = write_spec(project, "untitled", chunking={"title": False}, **sections)
    steps, _, _ = run_with(untitled, RuleLLM())
    units = pl.read_parquet(artefact(project, "untitled", steps["bipartite.kw"])
                            / SUBCHUNKS_FILE)
    assert units.height > 0 and (units["context"] == units["text"]).all()
    # titled builds (the default) keep their fingerprints: no title key in their config
    titled = api.open_session(write_spec(project, "titled", **sections)).plan.by_name()
    assert "title" not in titled["bipartite.kw"].config
    assert api.open_session(untitled).plan.by_name()["bipartite.kw"].config["title"] is False


def test_ket_cites_the_parts_of_its_context(project: Path) -> None:
    """answer.cite with ket: the context's rows, text units and sub-chunks are numbered and
    a citation names one of them (a chunk by its id, any other part by its number)."""
    spec = write_spec(
        project, "ket-cite", corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
        graphs=[{"name": "skel", "kind": "skeleton", "beta": 0.2},
                {"name": "kw", "kind": "bipartite"}],
        query=[{"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
                "budget_tokens": 600}],
        answer={"cite": True, "questions": 1},
        evaluate={"metrics": ["cited", "citation_precision", "citation_precision_answer"]})
    steps, rows, _ = run_with(spec, RuleLLM())
    citations = read_citations(api.open_session(spec).artefact("answer.ket"))
    assert citations.height == 1 and citations["shown"][0] > 1
    cited, texts = citations["cited_units"][0].to_list(), citations["cited_texts"][0].to_list()
    assert cited and len(cited) == len(texts) and all(texts)
    assert steps["answer.ket"]["notes"]["cited"] == 1 and rows["ket"]["cited"] == 1.0
