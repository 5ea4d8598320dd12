"""ARK end to end with the rule-following stand-in LLM, the real MiniLM, spaCy and
LanceDB: training steps, a trained embedder in naive, ket and hugrag, the split, warm
reruns, partial retraining and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.contents.training import LOSSES, model_dir, read_alignment, read_augmented
from kgrag.errors import KgragError
from kgrag.models.registry import resolve_embedder
from kgrag.training.split import training_questions
from tests.conftest import SHARED_DATA, make_project, write_spec
from tests.standin import RuleLLM, open_with, run_with

FAST = {"name": "ark", "method": "ark", "max_questions": 3, "candidates": 4, "positives": 2,
        "augmented": 3, "epochs": [1, 1, 1], "batch_size": 4, "negatives": 2,
        "hard_negatives": 5, "max_seq_length": 64, "warmup_steps": 0,
        "learning_rates": [1e-4, 1e-4, 1e-4]}
EVALUATE = {"metrics": ["recall@5", "coverage"]}


@pytest.fixture(scope="module")
def eight(tmp_path_factory) -> Path:
    """A project whose corpus is the first 8 MuSiQue questions."""
    root = make_project(tmp_path_factory.mktemp("ark") / "proj")
    lines = (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:8]
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _spec(project: Path, name: str, training: dict, **sections) -> Path:
    # the project's own call cache: module-scoped runs precede each test's isolated one
    sections = {"extraction": {"method": "nlp"}, "training": [training],
                "answer": {"questions": 0}, "evaluate": EVALUATE,
                "cache": {"dir": "../calls"}, **sections}
    return write_spec(project, name, **sections)


@pytest.fixture(scope="module")
def side_by_side(eight: Path) -> tuple[Path, tuple]:
    spec = _spec(eight, "ark-naive", FAST, query=[
        {"name": "base", "strategy": "naive", "budget_tokens": 1000},
        {"name": "tuned", "strategy": "naive", "embedder": "ark", "budget_tokens": 1000}])
    llm = RuleLLM()
    return spec, run_with(spec, llm), llm


def test_training_steps_write_positives_questions_and_one_model_per_stage(side_by_side):
    spec, (steps, rows, _), llm = side_by_side
    session = api.open_session(spec)
    alignment = read_alignment(session.artefact("align.ark"))
    assert alignment["question_id"].n_unique() == steps["align.ark"]["notes"]["questions"]
    assert alignment.group_by("question_id").agg(pl.col("positive").sum())["positive"].max() == 2
    augmented = read_augmented(session.artefact("augment.ark"))
    assert set(augmented["size"]) <= {"large", "small"} and augmented.height > 0
    for stage in ("stage1.ark", "stage2.ark", "stage3.ark"):
        assert (model_dir(session.artefact(stage)) / "config.json").is_file()
    assert pl.read_parquet(session.artefact("stage1.ark") / LOSSES).height == steps["stage1.ark"]["notes"]["steps"]
    assert steps["align.ark"]["llm"]["calls"] == llm.calls.count("logprob") > 0
    assert {"base", "tuned"} <= set(rows)
    trained = json.loads((session.run_dir / "metrics.json").read_text())["training"]
    assert [t["graph"] for t in trained] == ["ark"]
    assert trained[0]["llm_calls"] == llm.calls.count("logprob") + llm.calls.count("augment")
    assert trained[0]["stage3_examples"] == steps["stage3.ark"]["notes"]["examples"]


def test_no_evaluated_question_was_trained_on(side_by_side):
    spec, _, _ = side_by_side
    session = api.open_session(spec)
    ids = read_questions(session.artefact("corpus"))["question_id"].to_list()
    trained = training_questions(ids, 0.5, 0)
    assert len(trained) == 4
    for name in ("retrieve.base", "retrieve.tuned"):
        retrieved = set(read_retrieved(session.artefact(name))["question_id"])
        assert retrieved == set(ids) - trained


def test_the_tuned_index_is_embedded_by_the_trained_model(side_by_side):
    spec, _, _ = side_by_side
    session = api.open_session(spec)
    by_name = session.plan.by_name()
    assert by_name["dense.ark"].config["embedder"] == by_name["stage3.ark"].fingerprint
    assert by_name["dense"].config["embedder"] != by_name["dense.ark"].config["embedder"]
    assert by_name["retrieve.tuned"].config["embedder"] == by_name["stage3.ark"].fingerprint


def test_a_warm_rerun_trains_nothing_and_calls_no_model(side_by_side):
    spec, _, _ = side_by_side
    llm = RuleLLM()
    steps, _, _ = run_with(spec, llm)
    assert {s["status"] for s in steps.values()} == {"reused"}
    assert llm.calls == []


def test_a_changed_stage_3_retrains_only_stage_3_and_what_reads_it(eight, side_by_side):
    spec = _spec(eight, "ark-naive", {**FAST, "epochs": [1, 1, 2]}, query=[
        {"name": "base", "strategy": "naive", "budget_tokens": 1000},
        {"name": "tuned", "strategy": "naive", "embedder": "ark", "budget_tokens": 1000}])
    llm = RuleLLM()
    steps, _, _ = run_with(spec, llm)
    ran = {name for name, s in steps.items() if s["status"] == "ran"}
    assert ran == {"stage3.ark", "dense.ark", "retrieve.tuned", "evaluate"}
    assert llm.calls == []


def test_naive_ket_and_hugrag_run_on_the_trained_embedder(project):
    # the 3-question project: 2 train, 1 is evaluated; graphs over its 60 paragraphs
    spec = _spec(project, "ark-graphs", {**FAST, "stages": 1},
                 models={"embedder": {"model": "ark"}},
                 graphs=[{"name": "kg", "kind": "skeleton", "beta": 1.0,
                          "relationship_vectors": False},
                         {"name": "kw", "kind": "bipartite"},
                         {"name": "h", "kind": "hierarchy", "summaries": "extractive",
                          "gate_judge": "similarity"}],
                 query=[{"name": "naive", "strategy": "naive"},
                        {"name": "ket", "strategy": "ket", "skeleton": "kg", "bipartite": "kw",
                         "theta": 0.4},
                        {"name": "hugrag", "strategy": "hugrag", "hierarchy": "h",
                         "causal_filter": False}])
    _, rows, _ = run_with(spec, RuleLLM())
    assert all(rows[r]["n_retrieved"] == 1 for r in ("naive", "ket", "hugrag"))
    session = api.open_session(spec)
    trained = session.plan.by_name()["stage1.ark"].fingerprint
    assert session.plan.by_name()["dense"].config["embedder"] == trained
    assert session.plan.by_name()["core.kg"].config["embedder"] == trained
    # chunks come before training, so their tokenizer is the base model's
    base = api.open_session(_spec(project, "plain", FAST,
                                  query=[{"name": "naive", "strategy": "naive"}]))
    assert (session.plan.by_name()["chunks"].fingerprint
            == base.plan.by_name()["chunks"].fingerprint)


def test_skips_are_counted_when_augmentation_never_parses(eight, side_by_side):
    spec = _spec(eight, "ark-unparsed", {**FAST, "augmented": 4}, query=[
        {"name": "tuned", "strategy": "naive", "embedder": "ark"}])
    steps, rows, _ = run_with(spec, RuleLLM(augment_parse=False))
    notes = steps["augment.ark"]["notes"]
    assert notes["augmented"] == 0 and notes["skipped_unparsed"] == 2 * notes["questions"]
    assert steps["stage2.ark"]["notes"]["examples"] == 0  # kept stage 1's model
    assert rows["tuned"]["n_retrieved"] == 4


def test_a_question_whose_answer_no_unit_holds_is_skipped_and_counted(tmp_path):
    root = make_project(tmp_path / "proj")
    docs = [{"id": f"d{i}", "title": f"Doc {i}", "text": f"Town {i} lies on river R{i}."}
            for i in range(6)]
    (root / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    questions = [{"id": f"q{i}", "question": f"Which river does Town {i} lie on?",
                  "answers": [f"R{i}" if i % 2 else "the Zambezi"]} for i in range(6)]
    (root / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    spec = _spec(root, "odd", {**FAST, "max_questions": None, "stages": 1},
                 corpus={"dataset": "jsonl", "path": "../docs.jsonl",
                         "questions_file": "../qa.jsonl"},
                 query=[{"name": "tuned", "strategy": "naive", "embedder": "ark"}],
                 evaluate={"metrics": ["coverage"]})
    steps, _, _ = run_with(spec, RuleLLM())
    trained = training_questions([q["id"] for q in questions], 0.5, 0)
    absent = sum(1 for q in questions if q["id"] in trained and "Zambezi" in q["answers"][0])
    assert steps["align.ark"]["notes"]["skipped_no_answer"] == absent
    assert steps["align.ark"]["notes"]["questions"] == len(trained) - absent


def test_an_ablation_with_fewer_stages_shares_the_longer_entrys_steps(eight):
    spec = _spec(eight, "ablate", FAST, query=[
        {"name": "s1", "strategy": "naive", "embedder": "ark-s1"},
        {"name": "s3", "strategy": "naive", "embedder": "ark"}])
    text = json.loads(spec.read_text())
    text["training"].append({**FAST, "name": "ark-s1", "stages": 1})
    spec.write_text(json.dumps(text))
    session = open_with(spec, RuleLLM())
    names = [s.name for s in session.plan.steps]
    assert "stage1.ark-s1" not in names and "align.ark-s1" not in names
    dense = session.plan.by_name()["dense.ark-s1"].config["embedder"]
    assert dense == session.plan.by_name()["stage1.ark"].fingerprint


def test_a_strategy_may_name_a_model_folder_by_path(project):
    folder = str(resolve_embedder("all-MiniLM-L6-v2").path)  # e.g. another run's model
    spec = write_spec(project, "by-path", answer={"questions": 0}, evaluate=EVALUATE, query=[
        {"name": "base", "strategy": "naive"},
        {"name": "folder", "strategy": "naive", "embedder": folder}])
    _, rows, _ = run_with(spec, RuleLLM())
    session = api.open_session(spec)
    index = [s for s in session.plan.steps if s.name.startswith("dense.embedder-")]
    assert len(index) == 1 and "/" not in index[0].name  # a path makes no folder name
    assert rows["folder"]["recall@5"] == rows["base"]["recall@5"]  # the same model


def test_a_trained_embedder_the_spec_does_not_define_is_an_error(eight):
    spec = write_spec(eight, "missing", query=[
        {"name": "tuned", "strategy": "naive", "embedder": "ark"}])
    with pytest.raises(KgragError, match="unknown embedder 'ark'"):
        open_with(spec, RuleLLM())


def test_training_over_a_corpus_without_questions_is_an_error(tmp_path):
    root = make_project(tmp_path / "proj")
    (root / "docs.jsonl").write_text(json.dumps({"id": "d", "text": "Some text."}) + "\n")
    spec = _spec(root, "noq", FAST, corpus={"dataset": "jsonl", "path": "../docs.jsonl"},
                 query=[{"name": "naive", "strategy": "naive"}])
    with pytest.raises(KgragError, match="training needs questions"):
        open_with(spec, RuleLLM())
