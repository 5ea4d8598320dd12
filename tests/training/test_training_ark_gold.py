"""ARK's oracle row, ``positives: gold``: the supporting documents' chunks are the
positives, no unit is scored, the question set and the curriculum are the scored row's;
a corpus without supporting labels is one error; the option is off by default."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kgrag import api
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.training import read_alignment
from kgrag.errors import KgragError
from kgrag.training.alignment import gold_units
from kgrag.training.split import training_questions
from tests.conftest import SHARED_DATA, make_project, write_spec
from tests.standin import RuleLLM, open_with, run_with

FAST = {"name": "ark", "method": "ark", "max_questions": 3, "candidates": 6, "positives": 2,
        "augmented": 3, "epochs": [1, 1, 1], "batch_size": 4, "negatives": 2,
        "hard_negatives": 5, "max_seq_length": 64, "warmup_steps": 0,
        "learning_rates": [1e-4, 1e-4, 1e-4], "stages": 1}


def _spec(project: Path, name: str, entries: list[dict], **sections) -> Path:
    sections = {"extraction": {"method": "nlp"}, "training": entries,
                "answer": {"questions": 0}, "evaluate": {"metrics": ["recall@5"]},
                "query": [{"name": e["name"], "strategy": "naive", "embedder": e["name"]}
                          for e in entries], **sections}
    return write_spec(project, name, **sections)


@pytest.fixture(scope="module")
def eight(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("gold") / "proj")
    lines = (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:8]
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_gold_units_rank_the_supporting_units_first():
    scored = gold_units(["a", "b", "c", "d"], np.array([0.9, 0.1, 0.5, 0.3]),
                        [False, True, False, True])
    assert scored.positives(2) == ["d", "b"]  # supporting, then by cosine
    assert set(scored.raw) == {"parameter"}


def test_the_oracle_takes_the_supporting_chunks_as_positives_and_calls_no_model(eight):
    spec = _spec(eight, "gold", [{**FAST, "name": "real"},
                                 {**FAST, "name": "gold", "positives": "gold"}])
    llm = RuleLLM()
    steps, rows, _ = run_with(spec, llm)
    assert steps["align.gold"]["llm"]["calls"] == 0
    assert llm.calls.count("logprob") == steps["align.real"]["llm"]["calls"] > 0
    session = api.open_session(spec)
    real = read_alignment(session.artefact("align.real"))
    gold = read_alignment(session.artefact("align.gold"))
    # the same questions and candidates: only the positives differ
    assert real.select("question_id", "chunk_id").equals(gold.select("question_id", "chunk_id"))
    chunks = read_chunks(session.artefact("chunks"), ["chunk_id", "doc_id"])
    doc_of = dict(zip(chunks["chunk_id"], chunks["doc_id"]))
    supporting = dict(zip(*read_questions(session.artefact("corpus")).select(
        "question_id", "supporting_doc_ids")))
    expected = [doc_of[c] in supporting[q] for q, c in gold.select("question_id", "chunk_id")
                .iter_rows()]
    assert gold["positive"].to_list() == expected and any(expected)
    assert gold["forward"].is_null().all() and gold["backward"].is_null().all()
    assert steps["stage1.gold"]["notes"]["examples"] == sum(expected)
    assert {"real", "gold"} <= set(rows)


def test_the_oracle_is_off_by_default_and_keeps_the_scored_rows_fingerprint(eight):
    plain = open_with(_spec(eight, "plain", [FAST]), RuleLLM()).plan.by_name()
    explicit = open_with(_spec(eight, "explicit", [{**FAST, "positives": 2}]),
                         RuleLLM()).plan.by_name()
    gold = open_with(_spec(eight, "oracle", [{**FAST, "positives": "gold"}]),
                     RuleLLM()).plan.by_name()
    assert plain["align.ark"].fingerprint == explicit["align.ark"].fingerprint
    assert "scorer" in plain["align.ark"].config and "scorer" not in gold["align.ark"].config
    assert gold["align.ark"].fingerprint != plain["align.ark"].fingerprint


def test_the_oracle_over_a_corpus_without_supporting_labels_is_an_error(tmp_path):
    root = make_project(tmp_path / "proj")
    docs = [{"id": f"d{i}", "title": f"Doc {i}", "text": f"Town {i} lies on river R{i}."}
            for i in range(6)]
    (root / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    questions = [{"id": f"q{i}", "question": f"Which river does Town {i} lie on?",
                  "answers": [f"R{i}"]} for i in range(6)]
    (root / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    spec = _spec(root, "unlabelled", [{**FAST, "positives": "gold", "max_questions": None}],
                 corpus={"dataset": "jsonl", "path": "../docs.jsonl",
                         "questions_file": "../qa.jsonl"},
                 evaluate={"metrics": ["coverage"]})
    with pytest.raises(KgragError, match="positives: gold needs the training questions' "
                                         "supporting documents"):
        run_with(spec, RuleLLM())


def test_positives_takes_a_number_or_gold_only(eight):
    spec = _spec(eight, "odd", [{**FAST, "positives": "silver"}])
    with pytest.raises(KgragError, match="positives"):
        open_with(spec, RuleLLM())


def test_a_question_without_supporting_documents_is_skipped_and_counted(tmp_path):
    root = make_project(tmp_path / "proj")
    docs = [{"id": f"d{i}", "title": f"Doc {i}", "text": f"Town {i} lies on river R{i}."}
            for i in range(8)]
    (root / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    questions = [{"id": f"q{i}", "question": f"Which river does Town {i} lie on?",
                  "answers": [f"R{i}"], **({"supporting": [f"d{i}"]} if i % 2 else {})}
                 for i in range(8)]
    (root / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    spec = _spec(root, "half", [{**FAST, "positives": "gold", "max_questions": None}],
                 corpus={"dataset": "jsonl", "path": "../docs.jsonl",
                         "questions_file": "../qa.jsonl"},
                 evaluate={"metrics": ["coverage"]})
    steps, _, _ = run_with(spec, RuleLLM())
    session = api.open_session(spec)
    trained = read_questions(session.artefact("corpus")).filter(
        pl.col("question_id").is_in(read_alignment(session.artefact("align.ark"))
                                    ["question_id"].unique().implode()))
    notes = steps["align.ark"]["notes"]
    chosen = training_questions([q["id"] for q in questions], 0.5, 0)
    assert notes["skipped_no_supporting"] == sum(
        1 for q in questions if q["id"] in chosen and "supporting" not in q) > 0
    assert (trained["supporting_doc_ids"].list.len() > 0).all()
    assert notes["questions"] == trained.height
