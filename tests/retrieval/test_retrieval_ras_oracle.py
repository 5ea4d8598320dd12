"""RAS's oracle planner (``planning: oracle``): gold sub-questions in place of the planner,
from MuSiQue's decompositions and HotpotQA-SUBQ's sub-queries; the datasets without any
are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from kgrag.cli import main
from kgrag.contents.corpus import DECOMPOSITIONS, read_decompositions
from kgrag.errors import KgragError
from kgrag.retrieval.ras.oracle import resolved
from kgrag.spec.load import load_spec
from tests.conftest import SHARED_DATA
from tests.retrieval.test_retrieval_ras import ras_spec
from tests.standin import RuleLLM, open_with, run_with

ORACLE = {"planning": "oracle"}


def _traces(session) -> list[dict]:
    table = pl.read_parquet(session.artefact("retrieve.ras") / "retrieved.parquet")
    return [json.loads(t) for t in table["trace"]]


def test_a_step_answer_stands_in_for_its_reference():
    steps = [("Van Hook Township >> located in", "Mountrail County"),
             ("#1 >> capital", "Stanley"), ("Who founded #2 and #1, not #3?", "x")]
    assert resolved(steps) == ["Van Hook Township >> located in", "Mountrail County >> capital",
                               "Who founded Stanley and Mountrail County, not #3?"]


def test_the_musique_importer_keeps_each_decomposition_in_order(project: Path):
    run_with(ras_spec(project, ORACLE), RuleLLM())
    session = open_with(ras_spec(project, ORACLE), RuleLLM())
    table = read_decompositions(session.artefact("corpus"))
    first = json.loads((project / "corpus.jsonl").read_text().splitlines()[0])
    mine = table.filter(pl.col("question_id") == first["id"]).sort("step")
    assert mine.select("question", "answer").rows() == [
        (d["question"], d["answer"]) for d in first["question_decomposition"]]
    assert mine["step"].to_list() == list(range(1, len(first["question_decomposition"]) + 1))


def test_the_oracle_retrieves_for_the_question_then_each_gold_subquestion(project: Path):
    path = ras_spec(project, ORACLE)
    llm = RuleLLM()
    run_with(path, llm)
    session = open_with(path, llm)
    lines = [json.loads(line) for line in (project / "corpus.jsonl").read_text().splitlines()]
    gold = {r["question"]: resolved([(d["question"], d["answer"])
                                     for d in r["question_decomposition"]]) for r in lines}
    assert "plan" not in llm.calls  # no planner: the gold plan makes no model call
    traces = _traces(session)
    for trace in traces:
        question = trace["steps"][0]["query"]
        assert [s["query"] for s in trace["steps"]] == [question, *gold[question]]
        assert trace["stop"] == "sufficient" and trace["plans"][-1] == "[SUFFICIENT]"
        assert trace["plans"][1:-1] == [f"[SUBQ] {q}" for q in gold[question]]
        assert "#1" not in " ".join(s["query"] for s in trace["steps"])
    assert len(traces) == 3


def test_the_iteration_cap_still_bounds_the_oracle(project: Path):
    path = ras_spec(project, {**ORACLE, "max_iterations": 2})
    run_with(path, RuleLLM())
    for trace in _traces(open_with(path, RuleLLM())):
        assert trace["iterations"] == 2 and len(trace["steps"]) == 2


def test_a_corpus_artefact_without_decompositions_asks_for_a_rebuild(project: Path):
    path = ras_spec(project, ORACLE)
    run_with(path, RuleLLM())
    session = open_with(path, RuleLLM())
    folder = session.artefact("corpus")  # as one written before the file was: not listed
    (folder / DECOMPOSITIONS).unlink()
    listed = json.loads((folder / "files.json").read_text())
    del listed["files"][DECOMPOSITIONS]
    (folder / "files.json").write_text(json.dumps(listed))
    shutil.rmtree(session.artefact("retrieve.ras"))
    with pytest.raises(KgragError, match="predates them; rerun with --force corpus"):
        run_with(path, RuleLLM())


def _hotpot_project(project: Path) -> Path:
    lines = (SHARED_DATA / "hotpotqa_200.jsonl").read_text().splitlines()[:3]
    (project / "hotpot.jsonl").write_text("\n".join(lines) + "\n")
    return ras_spec(project, ORACLE, corpus={"dataset": "hotpotqa", "path": "../hotpot.jsonl"})


def test_on_hotpotqa_the_gold_is_hotpotqa_subqs_subqueries_of_the_supporting_paragraphs(
        project: Path):
    path = _hotpot_project(project)
    llm = RuleLLM()
    run_with(path, llm)
    assert "plan" not in llm.calls and llm.calls.count("subq") >= 3 * 2
    records = [json.loads(line) for line in (project / "hotpot.jsonl").read_text().splitlines()]
    for trace in _traces(open_with(path, llm)):
        question = trace["steps"][0]["query"]
        record = next(r for r in records if r["question"] == question)
        titles = [t for t, _ in record["context"]
                  if t in {fact[0] for fact in record["supporting_facts"]}]
        # the stand-in writes "What is <title>?" for each supporting paragraph, in order
        assert [s["query"] for s in trace["steps"][1:]] == [f"What is {t}?" for t in titles]
    again = RuleLLM()
    run_with(path, again)
    assert again.calls == []  # the sub-queries are cached like every call


@pytest.mark.parametrize("dataset, file", [("2wiki", "2wiki_200.jsonl")])
def test_oracle_planning_on_data_without_decompositions_exits_2_naming_it(
        project: Path, capsys, dataset: str, file: str):
    lines = (SHARED_DATA / file).read_text().splitlines()[:3]
    (project / "other.jsonl").write_text("\n".join(lines) + "\n")
    path = ras_spec(project, ORACLE, corpus={"dataset": dataset, "path": "../other.jsonl"})
    with pytest.raises(KgragError, match=f"dataset '{dataset}' has none"):
        load_spec(path)
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kgrag: error:") and f"'{dataset}'" in err
    assert "Traceback" not in err and err.count("planning: oracle") == 1
