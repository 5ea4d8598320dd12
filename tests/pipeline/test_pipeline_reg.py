"""ReG end to end on a toy KGQA file with the rule-following stand-in LLM and the real
MiniLM and LanceDB: the kg step, supervision, refinement, both trained retrievers named by
strategies, flat and chain contexts, ``ans:`` answers and their metrics, the split, a warm
rerun, the gold-label oracle, retrieval graphs padded with distractors, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import igraph
import networkx as nx
import polars as pl
import pytest

from kgrag import api
from kgrag.contents.kg import GRAPHML, KgIndex
from kgrag.contents.metrics import read_metrics
from kgrag.contents.retrieved import read_retrieved
from kgrag.contents.training import LOSSES, read_refined, read_supervision
from kgrag.errors import KgragError
from tests.conftest import make_project, write_spec
from tests.standin import RuleLLM, run_with

PEOPLE = ["Alice Moreau", "Bruno Salas", "Chloe Berg", "Dmitri Orlov", "Elena Rossi",
          "Farid Haddad", "Greta Lind", "Hiro Tanaka", "Ines Duarte", "Jonas Weber",
          "Kira Novak", "Liam Byrne"]
CITIES = ["Paris", "Lima", "Oslo", "Rome", "Cairo", "Quito", "Dakar", "Hanoi", "Minsk",
          "Accra", "Sofia", "Tunis"]
METRICS = ["recall@1", "recall@5", "hit", "hit@1", "macro_f1", "micro_f1", "answer_coverage"]


def kgqa_lines() -> list[dict]:
    """Twelve birthplace questions over a small graph with distractors, and one whose
    topic entity is not in the graph."""
    lines = []
    for i, (person, city) in enumerate(zip(PEOPLE, CITIES)):
        friend = PEOPLE[(i + 1) % len(PEOPLE)]
        lines.append({"id": f"q{i}", "question": f"where was {person.lower()} born?",
                      "answers": [city], "topic_entities": [person],
                      "gold_triples": [[person, "people.person.place_of_birth", city],
                                       [person, "people.person.friend", friend],
                                       [city, "location.location.containedby", "Earth"]]})
    lines.append({"id": "ghost", "question": "where was zed born?", "answers": ["Bern"],
                  "topic_entities": ["Zed Ghost"],
                  "gold_triples": [["Zed", "people.person.place_of_birth", "Bern"]]})
    return lines


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("reg") / "proj")
    (root / "kgqa.jsonl").write_text("".join(json.dumps(line) + "\n" for line in kgqa_lines()))
    return root


TRAINING = [
    {"name": "weak", "method": "reg_triple", "labels": "weak", "training_epochs": 3},
    {"name": "refined", "method": "reg_triple", "labels": "refined", "training_epochs": 3,
     "refine_questions": 2, "max_paths": 4},
    {"name": "entity", "method": "reg_entity", "labels": "refined", "training_epochs": 2,
     "hidden": 16, "refine_questions": 2, "max_paths": 4},
    {"name": "gold", "method": "reg_triple", "labels": "gold", "training_epochs": 3},
]
QUERY = [
    {"name": "cosine", "strategy": "triple_cosine", "budget_tokens": 200},
    {"name": "bm25", "strategy": "triple_bm25", "budget_tokens": 200},
    {"name": "reg-weak", "strategy": "reg", "retriever": "weak", "budget_tokens": 200},
    {"name": "reg-chains", "strategy": "reg", "retriever": "refined", "context": "chains",
     "budget_tokens": 200},
    {"name": "reg-entity", "strategy": "reg", "retriever": "entity", "level": "entity",
     "budget_tokens": 200},
    {"name": "reg-gold", "strategy": "reg", "retriever": "gold", "budget_tokens": 200},
]


def _spec(project: Path, name: str, **sections) -> Path:
    sections = {"corpus": {"dataset": "kgqa", "path": "../kgqa.jsonl"},
                "training": TRAINING, "query": QUERY,
                "answer": {"length": "list", "questions": 3},
                "evaluate": {"metrics": METRICS}, "cache": {"dir": "../calls"}, **sections}
    return write_spec(project, name, **sections)


@pytest.fixture(scope="module")
def first_run(toy: Path):
    spec = _spec(toy, "reg")
    llm = RuleLLM()
    return spec, run_with(spec, llm), llm


def test_the_plan_chunks_nothing_and_shares_supervision(first_run):
    _, (steps, _, _), _ = first_run
    assert "chunks" not in steps and "dense" not in steps
    assert [s for s in steps if s.startswith(("supervise.", "refine."))] == [
        "supervise.weak", "refine.refined"]  # the other entries reuse them


def test_kg_step_counts_a_topic_entity_missing_from_the_graph(first_run):
    spec, (steps, _, _), _ = first_run
    notes = steps["kg"]["notes"]
    assert notes["missing_topic_entities"] == 1 and notes["questions_without_topic"] == 1
    assert notes["triples"] == 12 * 3 + 1
    folder = api.open_session(spec).artefact("kg")
    assert nx.read_graphml(folder / GRAPHML).number_of_edges() == 37
    assert igraph.Graph.Read_GraphML(str(folder / GRAPHML)).ecount() == 37


def test_training_records_losses_and_refinement_outcomes(first_run):
    spec, (steps, _, _), llm = first_run
    session = api.open_session(spec)
    supervised = steps["supervise.weak"]["notes"]
    assert supervised["questions"] + supervised["skipped_no_path"] == 6  # half of 13, rounded
    assert supervised["pool_after_mean"] <= supervised["pool_before_mean"]
    refined = read_refined(session.artefact("refine.refined"))
    assert refined["outcome"].to_list()[:2] == ["refined", "refined"]
    assert set(refined["outcome"].to_list()[2:]) <= {"weak_unrefined"}
    assert llm.calls.count("refine") == 2
    for entry, epochs in (("weak", 3), ("refined", 3), ("entity", 2)):
        losses = pl.read_parquet(session.artefact(f"train.{entry}") / LOSSES)
        assert losses["epoch"].to_list() == list(range(1, epochs + 1))
        assert steps[f"train.{entry}"]["notes"]["questions"] > 0
    rows = {row["graph"]: row for row in read_metrics(session.run_dir)["training"]}
    assert rows["refined"]["refined"] == 2 and rows["weak"]["pool_after_max"] == supervised[
        "pool_after_max"]  # the training rows carry the pool sizes and refinement outcomes
    assert rows["entity"]["train_peak_mb"] == steps["train.entity"]["peak_rss_mb"] > 0


def test_strategies_rank_held_out_triples_and_answer_in_ans_lines(first_run):
    spec, (_, rows, _), llm = first_run
    session = api.open_session(spec)
    for name in ("cosine", "bm25", "reg-weak", "reg-chains", "reg-entity", "reg-gold"):
        assert 0 <= rows[name]["recall@5"] <= 1 and rows[name]["recall@1"] <= rows[name][
            "recall@5"]
        assert {"hit", "hit@1", "macro_f1", "micro_f1", "answer_coverage"} <= set(rows[name])
    retrieved = read_retrieved(session.artefact("retrieve.reg-chains"))
    assert retrieved.height == 7  # 13 questions less the 6 trained on
    assert all(c.startswith("Chain 1. ") for c in retrieved["context"] if c)
    flat = read_retrieved(session.artefact("retrieve.reg-weak"))
    assert all(c.startswith("(") for c in flat["context"] if c)
    ghost = retrieved.filter(retrieved["question_id"] == "ghost")
    if ghost.height:  # held out: nothing to retrieve from an empty graph, a fallback
        assert ghost["unit_ids"].to_list() == [[]]
    assert llm.calls.count("answer") == 3 * len(QUERY)


def test_the_gold_oracle_trains_the_same_questions_on_their_gold_triples(first_run):
    _, (steps, _, _), _ = first_run
    weak, gold = steps["train.weak"]["notes"], steps["train.gold"]["notes"]
    assert gold["questions"] == weak["questions"] > 0 and gold["skipped_no_gold"] == 0
    # weak: the birthplace triple on the shortest path; gold: the question's three triples
    assert weak["positives"] == weak["questions"]
    assert gold["positives"] == 3 * gold["questions"]
    assert "skipped_no_gold" not in weak


def test_a_warm_rerun_calls_no_model_and_trains_nothing(first_run):
    spec, _, _ = first_run
    llm = RuleLLM()
    steps, _, _ = run_with(spec, llm)
    assert {s["status"] for s in steps.values()} == {"reused"}
    assert llm.calls == []


def test_an_unparseable_refinement_falls_back_to_weak_labels(toy: Path):
    spec = _spec(toy, "reg-unparsed", training=TRAINING[1:2],
                 query=[{"name": "reg", "strategy": "reg", "retriever": "refined"}],
                 answer={"questions": 0}, evaluate={"metrics": ["recall@5"]},
                 cache={"dir": "../calls-unparsed"})
    llm = RuleLLM(refine_parse=False)
    steps, rows, _ = run_with(spec, llm)
    assert steps["refine.refined"]["notes"]["fallback_unparsed"] == 2
    session = api.open_session(spec)
    refined = read_refined(session.artefact("refine.refined"))
    weak, _ = read_supervision(session.artefact("supervise.refined"))
    assert refined["selected"].to_list()[:2] == [[], []]
    assert refined["positives"].to_list() == weak["weak"].to_list()
    assert "reg" in rows


def test_a_malformed_triple_names_its_line(toy: Path):
    bad = toy / "bad.jsonl"
    lines = [json.dumps(line) for line in kgqa_lines()[:2]]
    lines.append(json.dumps({"id": "x", "question": "?", "answers": ["A"],
                             "topic_entities": ["A"], "gold_triples": [["A", "r"]]}))
    bad.write_text("\n".join(lines) + "\n")
    spec = _spec(toy, "reg-bad", corpus={"dataset": "kgqa", "path": "../bad.jsonl"},
                 training=[], query=QUERY[:1], answer={"questions": 0},
                 evaluate={"metrics": ["recall@5"]})
    with pytest.raises(KgragError, match=r"bad.jsonl:3: 'gold_triples' entries must be"):
        run_with(spec, RuleLLM())


def test_distractors_pad_every_retrieval_graph_to_the_size_asked(toy: Path):
    spec = _spec(toy, "reg-padded", corpus={"dataset": "kgqa", "path": "../kgqa.jsonl",
                                            "hops": 1, "graph_triples": 20},
                 training=TRAINING[:1], query=QUERY[:1], answer={"questions": 0},
                 evaluate={"metrics": ["recall@5"]})
    steps, rows, _ = run_with(spec, RuleLLM())
    index = KgIndex(api.open_session(spec).artefact("kg"))
    kg = index.kg
    for qid, found in index.by_id.items():
        own = set(kg.neighbourhood(found.topics, 1).tolist())
        if qid == "ghost":  # no topic entity in the graph: nothing to pad
            assert found.triples.tolist() == []
            continue
        assert len(found.triples) == 20 and own <= set(found.triples.tolist())
    assert steps["kg"]["notes"]["graph_triples_mean"] == round(12 * 20 / 13, 2)
    assert steps["supervise.weak"]["notes"]["questions"] > 0 and "cosine" in rows


def test_gold_labels_on_questions_without_gold_triples(toy: Path):
    """Questions whose gold_triples are empty (their graph carried by a line without a
    named answer) are left out and counted; when no supervised question has one, the
    step stops with one message."""
    lines = kgqa_lines()[:12]
    carrier = {"id": "carrier", "question": "?", "answers": [None], "topic_entities": [],
               "gold_triples": [t for line in lines for t in line["gold_triples"]]}
    for line in lines[6:]:
        line["gold_triples"] = []
    (toy / "some-gold.jsonl").write_text("".join(
        json.dumps(line) + "\n" for line in [carrier, *lines]))
    (toy / "no-gold.jsonl").write_text("".join(
        json.dumps(line) + "\n" for line in [carrier, *lines[6:]]))
    gold_only = {"training": TRAINING[-1:], "answer": {"questions": 0},
                 "query": [{"name": "reg-gold", "strategy": "reg", "retriever": "gold"}],
                 "evaluate": {"metrics": ["recall@5"]}}
    spec = _spec(toy, "reg-some-gold", corpus={"dataset": "kgqa",
                                               "path": "../some-gold.jsonl"}, **gold_only)
    steps, _, _ = run_with(spec, RuleLLM())
    supervised, _ = read_supervision(api.open_session(spec).artefact("supervise.gold"))
    without = sum(qid in {line["id"] for line in lines[6:]}
                  for qid in supervised["question_id"])
    notes = steps["train.gold"]["notes"]
    assert notes["skipped_no_gold"] == without > 0 and notes["questions"] == (
        supervised.height - without)
    spec = _spec(toy, "reg-no-gold", corpus={"dataset": "kgqa", "path": "../no-gold.jsonl"},
                 **gold_only)
    with pytest.raises(KgragError, match=r"train.gold: labels: gold, but none of the \d+ "
                                         r"supervised questions has a gold triple"):
        run_with(spec, RuleLLM())
