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

import pytest

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
