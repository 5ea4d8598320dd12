"""HugRAG end to end on a real HolisQA slice with a rule-following stand-in LLM.

The stand-in (``tests.standin.RuleLLM``) answers each kind of request the way a model
must, so the whole build and every ablation run in seconds, deterministically, with
the real embedder, LanceDB, Leiden and the evaluation. The real bundled models run
in tests/integration/test_integration_hugrag.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.contents.summaries import SUMMARIES_FILE
from kgrag.graphs.module_summaries import extractive_summary
from kgrag.spec import check_spec
from tests.conftest import SHARED_DATA, write_spec
from tests.standin import WORD, RuleLLM, run_with

QUERY = [
    {"name": "naive", "strategy": "naive", "budget_tokens": 600},
    {"name": "hug", "strategy": "hugrag", "hierarchy": "h", "budget_tokens": 600},
    {"name": "hug-no-gates", "strategy": "hugrag", "hierarchy": "h", "use_gates": False,
     "budget_tokens": 600},
    {"name": "hug-flat", "strategy": "hugrag", "hierarchy": "h", "use_hierarchy": False,
     "causal_filter": False, "budget_tokens": 600},
    {"name": "hug-standard", "strategy": "hugrag", "hierarchy": "h",
     "filter_prompt": "standard", "budget_tokens": 600},
]


@pytest.fixture
def holisqa(project: Path) -> Path:
    shutil.copytree(SHARED_DATA / "holisqa" / "business", project / "business")
    return project


def spec(project: Path, **changes) -> Path:
    sections = {"corpus": {"dataset": "holisqa", "path": "../business", "limit": 2},
                "chunking": {"size": 128, "overlap": 16, "title": False},
                "graphs": [{"name": "h", "kind": "hierarchy", "max_cluster_size": 4,
                            "gate_min_similarity": 0.0}],
                "query": QUERY, "answer": {"length": "long"},
                "evaluate": {"metrics": ["f1", "context_recall", "recall@5"]}}
    sections.update(changes)
    return write_spec(project, "hug", **sections)


def test_hugrag_builds_a_hierarchy_and_compares_every_ablation(holisqa: Path) -> None:
    llm = RuleLLM()
    steps, rows, _ = run_with(spec(holisqa), llm)
    hierarchy = steps["hierarchy.h"]["notes"]
    assert hierarchy["modules"] >= 2 and hierarchy["nodes"] > hierarchy["modules"]
    assert sum(hierarchy["modules_per_level"].values()) == hierarchy["modules"]
    assert llm.calls.count("summary") == hierarchy["modules"]
    gates = steps["gates.h"]["notes"]
    assert gates["checks"] == llm.calls.count("gate") and gates["gates"] == gates["checks"]
    assert gates["checks"] < gates["all_pairs"]
    # two LLM calls per question with the filter (filter + answer), one without
    assert rows["hug"]["llm_calls_per_query"] == 2
    assert rows["hug-flat"]["llm_calls_per_query"] == 1
    assert rows["naive"]["llm_calls_per_query"] == 1
    for name in ("hug", "hug-no-gates", "hug-standard"):
        assert rows[name]["context_tokens_mean"] <= 600
        assert 0 <= rows[name]["context_recall"] <= 1
    # structural metrics: with and without gates on the same questions for "hug"
    assert {"reachability", "reachability_no_gates", "gold_coverage"} <= rows["hug"].keys()
    assert "reachability_no_gates" not in rows["hug-no-gates"]
    assert rows["hug"]["structural_questions"] >= 1
    # the gate-free expansion inside "hug" is the no-gates ablation's own search
    assert rows["hug"]["reachability_no_gates"] == rows["hug-no-gates"]["reachability"]
    assert rows["hug"]["gold_coverage_no_gates"] == rows["hug-no-gates"]["gold_coverage"]

    # warm rerun: no model calls at all
    warm = RuleLLM()
    again, _, _ = run_with(spec(holisqa), warm)
    assert warm.calls == [] and all(s["status"] == "reused" for s in again.values())

    # a query-only change: nothing upstream reruns, no indexing call
    changed = [{**q, "fan_out": 2} if q["name"] == "hug" else q for q in QUERY]
    query_only = RuleLLM()
    third, _, _ = run_with(spec(holisqa, query=changed), query_only)
    ran = {n for n, s in third.items() if s["status"] == "ran"}
    assert ran == {"retrieve.hug", "answer.hug", "evaluate"}
    assert set(query_only.calls) <= {"filter", "answer"}


def test_summary_and_gate_fallbacks_are_recorded(holisqa: Path) -> None:
    # summaries never parse; gate answers are neither yes nor no (a model given no grammar)
    steps, rows, _ = run_with(spec(holisqa), RuleLLM(summaries_parse=False, gate="perhaps"))
    summaries = steps["summaries.h"]["notes"]
    assert summaries["fallback_summaries"] and len(summaries["fallback_summaries"]) == \
        summaries["modules"]
    gates = steps["gates.h"]["notes"]
    assert gates["gates"] == 0 and "was answered yes" in gates["fallback"]
    assert gates["answers"] == {"yes": 0, "no": 0, "other": gates["checks"]}
    assert rows["hug"]["n_retrieved"] == 2


def test_a_graph_too_small_for_modules_falls_back(holisqa: Path) -> None:
    class Isolated(RuleLLM):
        @staticmethod
        def extraction(text: str) -> str:  # one entity, no relationship
            name = WORD.findall(text)[0]
            return json.dumps({"entities": [{"name": name, "type": "concept",
                                             "description": "alone"}], "relationships": []})

    steps, rows, _ = run_with(spec(holisqa), Isolated())
    assert steps["hierarchy.h"]["notes"]["modules"] == 0
    assert "too small for a hierarchy" in steps["hierarchy.h"]["notes"]["fallback"]
    assert rows["hug"]["n_retrieved"] == 2  # entity neighbourhoods still answer


def test_extractive_summaries_and_the_similarity_judge_call_no_llm(holisqa: Path) -> None:
    graph = {"name": "h", "kind": "hierarchy", "max_cluster_size": 4, "summaries": "extractive",
             "gate_min_similarity": 0.0, "gate_judge": "similarity",
             "gate_judge_similarity": 0.5}
    path = spec(holisqa, graphs=[graph], query=QUERY[1:2], answer={"questions": 0})
    session = api.open_session(path)
    bounds = {p.step.name: p.max_llm_calls for p in api.dry_run(session)}
    assert bounds["summaries.h"] == bounds["gates.h"] == 0
    plan = session.plan.by_name()
    assert "llm" not in plan["summaries.h"].config and "llm" not in plan["gates.h"].config
    llm = RuleLLM()
    steps, rows, _ = run_with(path, llm)
    assert "summary" not in llm.calls and "gate" not in llm.calls
    assert llm.calls.count("filter") == rows["hug"]["n_retrieved"]
    modules = steps["summaries.h"]["notes"]["modules"]
    assert modules == steps["hierarchy.h"]["notes"]["modules"] >= 2
    assert steps["summaries.h"]["notes"]["fallback_summaries"] == []
    gates = steps["gates.h"]["notes"]
    assert gates["checks"] > 0 and gates["answers"]["other"] == 0
    assert gates["answers"]["yes"] == gates["gates"] and gates["answers"]["no"] > 0
    summaries = pl.read_parquet(holisqa / "outputs" / "hug" / steps["summaries.h"]["artefact"]
                                / SUMMARIES_FILE)
    assert all(len(s) <= 600 and s for s in summaries["summary"])
    assert all(t.startswith(f"{title}: ") for title, t in
               summaries.select("title", "text").iter_rows())


def test_an_extractive_summary_takes_first_sentences_of_the_best_connected() -> None:
    descriptions = {"OIL PALM": "Oil palm grows in phosphorus-poor soil.; Yields vary.",
                    "APASE": "APase activity rose.",
                    "PHOSPHORUS": "Oil palm grows in phosphorus-poor soil.",
                    "SOIL": "x" * 700}
    title, summary = extractive_summary(["OIL PALM", "APASE", "PHOSPHORUS", "SOIL"],
                                        descriptions)
    assert title == "OIL PALM, APASE, PHOSPHORUS"
    # each member's first sentence once; a long one clipped to 200 characters
    assert summary == ("Oil palm grows in phosphorus-poor soil. APase activity rose. "
                       + "x" * 199 + "…")
    assert extractive_summary(["A", "B"], {"A": "", "B": ""}) == ("A, B", "A, B")


def test_a_query_entry_can_retrieve_for_its_first_questions_only(holisqa: Path) -> None:
    limited = [QUERY[0], {**QUERY[1], "questions": 1}]
    path = spec(holisqa, query=limited)
    session = api.open_session(path)
    bounds = {p.step.name: p.max_llm_calls for p in api.dry_run(session)}
    assert bounds["retrieve.hug"] == 1 + session.spec.models["llm"]["max_retries"]
    assert bounds["answer.hug"] == 1 and bounds["answer.naive"] == 2
    llm = RuleLLM()
    _, rows, _ = run_with(path, llm)
    assert rows["naive"]["n_retrieved"] == 2 and rows["hug"]["n_retrieved"] == 1
    assert rows["naive"]["n_answered"] == 2 and rows["hug"]["n_answered"] == 1
    assert llm.calls.count("filter") == 1 and llm.calls.count("answer") == 3


@pytest.mark.parametrize(("graph", "message"), [
    ({"gate_judge_similarity": 0.8},
     ("graphs[0].gate_judge_similarity: gate_judge_similarity is the threshold of gate_judge: "
     "similarity")),
    ({"summaries": "abstractive"},
     "graphs[0].summaries: expected one of llm, extractive; got 'abstractive'"),
])
def test_bad_no_llm_options_are_spec_errors(holisqa: Path, graph, message) -> None:
    path = spec(holisqa, graphs=[{"name": "h", "kind": "hierarchy", **graph}])
    problems = check_spec(path)
    assert len(problems) == 1 and message in problems[0]


SALIENT = {"name": "s", "kind": "hierarchy", "max_cluster_size": 4, "gate_min_similarity": 0.0,
           "salient_min_chunks": 2, "salient_max_share": 0.9, "relationships_per_entity": 1}


def test_the_salience_rule_keeps_recurring_entities_and_grounded_evidence_reads_them(
        holisqa: Path) -> None:
    graphs = [{"name": "h", "kind": "hierarchy", "max_cluster_size": 4,
               "gate_min_similarity": 0.0}, SALIENT]
    query = [QUERY[0], {"name": "hs", "strategy": "hugrag", "hierarchy": "s",
                        "evidence_split": "grounded", "filter_top_up": True,
                        "budget_tokens": 600}]
    path = spec(holisqa, graphs=graphs, query=query, answer={"questions": 0})
    plan = api.open_session(path).plan.by_name()
    assert "salient_min_chunks" not in plan["hierarchy.h"].config  # landed builds unchanged
    steps, rows, _ = run_with(path, RuleLLM())
    plain, salient = steps["hierarchy.h"]["notes"], steps["hierarchy.s"]["notes"]
    assert salient["canonical_entities"] == plain["nodes"]
    assert 2 <= salient["nodes"] < plain["nodes"] and salient["edges"] <= salient["nodes"]
    assert rows["hs"]["n_retrieved"] == rows["naive"]["n_retrieved"]
    assert rows["hs"]["context_tokens_mean"] > 0


def exits_2_keeping(project: Path, graph: dict, entry: dict, kept: str,
                    capsys: pytest.CaptureFixture[str]) -> str:
    """Run a salient nlp build with one hugrag entry that must fail: exit code 2, one
    ``kgrag: error:`` line (returned), no traceback, and the step ``kept`` still there."""
    path = spec(project, graphs=[graph], query=[{**QUERY[1], "causal_filter": False, **entry}],
                answer={"questions": 0}, extraction={"method": "nlp"})
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    message = [line for line in err.splitlines() if line.startswith("kgrag: error:")]
    assert len(message) == 1
    done = [p.name for p in (project / "outputs" / "hug").iterdir()]
    assert any(name.startswith(f"{kept}.h") for name in done)  # completed work is kept
    return message[0]


def test_a_salience_rule_that_keeps_fewer_than_two_entities_exits_2(
        holisqa: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = exits_2_keeping(holisqa, {**SALIENT, "name": "h", "salient_min_chunks": 10_000},
                              {}, "extract", capsys)
    assert "the salience rule keeps 0 of" in message and "at least two" in message


def test_a_summary_share_too_small_for_one_summary_exits_2_keeping_the_build(
        holisqa: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = {**SALIENT, "name": "h", "summaries": "extractive", "gate_judge": "similarity"}
    entry = {"evidence_split": "grounded", "summary_share": 0.01}  # 6 of 600 tokens
    message = exits_2_keeping(holisqa, graph, entry, "summaries", capsys)
    assert "too small for one module summary" in message
