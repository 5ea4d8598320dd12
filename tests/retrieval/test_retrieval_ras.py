"""Strategy ras: plan parsing, text-to-triples, the loop on the stand-in LLM, its trace,
its bad inputs and its warm rerun."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from kgrag.errors import KgragError
from kgrag.graphs.elements import Entity, Extraction, ExtractionCounts, Relationship
from kgrag.graphs.extraction.methods import EXTRACTION_METHODS
from kgrag.graphs.extraction.nlp import Chunk
from kgrag.retrieval import load
from kgrag.retrieval.ras.loop import check_iterations
from kgrag.retrieval.ras.plan import parse_plan
from kgrag.retrieval.ras.triples import QueryGraph, passage
from kgrag.spec.load import load_spec
from kgrag.training.ras_text import NO_RETRIEVAL, SUBQ, SUFFICIENT, history, render
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with, run_with


def test_plan_replies_of_the_three_forms_parse_and_anything_else_is_invalid_sufficient():
    assert parse_plan("[NO_RETRIEVAL]").kind == NO_RETRIEVAL
    assert parse_plan(" [SUFFICIENT]\n").kind == SUFFICIENT
    plan = parse_plan("[SUBQ]  Who directed  Alien?")
    assert (plan.kind, plan.query, plan.valid) == (SUBQ, "Who directed Alien?", True)
    for reply in ("I think so", "[SUBQ]", "[SUBQ] ", "[SUBQ] a [SUFFICIENT]?", "",
                  "[SUBQ] Who directed the film that was cut off by the token"):
        plan = parse_plan(reply)
        assert (plan.kind, plan.valid) == (SUFFICIENT, False), reply


def test_history_is_the_papers_format():
    text = history([("q0?", "(S> a| P> b| O> c)"), ("q1?", "")], "Q?")
    assert text.splitlines() == ["[SUBQ] q0?", "Retrieved Graph Information: (S> a| P> b| O> c)",
                                 "[SUBQ] q1?", "Retrieved Graph Information: ", "Question: Q?"]


def _extraction(*relationships: Relationship) -> Extraction:
    return Extraction("c1", (Entity("X", "t", "d", True),), relationships, 1, ExtractionCounts())


def test_labelled_nlp_relationships_become_triples_in_the_passages_casing():
    text = "Alien was directed by Ridley Scott. Alien and Scott met."
    found = EXTRACTION_METHODS["nlp"].triples(_extraction(
        Relationship("ALIEN", "RIDLEY SCOTT", "directed by: Alien was directed by Ridley Scott.",
                     8, True),
        Relationship("ALIEN", "SCOTT", "Alien and Scott met.", 2, True),  # co-occurrence
        Relationship("ALIEN", "RIDLEY SCOTT", "directed by: again", 8, True)),
        Chunk("c1", text, None))
    assert found == [("Alien", "directed by", "Ridley Scott")]
    assert render(found) == "(S> Alien| P> directed by| O> Ridley Scott)"


def test_hybrid_triples_take_the_llms_relation_words_then_the_nlp_label():
    unit = "# Alien\nAlien was directed by Ridley Scott in London."
    found = EXTRACTION_METHODS["hybrid"].triples(_extraction(
        Relationship("ALIEN", "RIDLEY SCOTT", "directed by; directed by: Alien was directed", 9,
                     True),
        Relationship("RIDLEY SCOTT", "LONDON", "in: Alien was directed by Ridley Scott in", 8,
                     True),
        Relationship("ALIEN", "LONDON", "Alien was directed by Ridley Scott in London.", 2,
                     True)), passage("c1", unit))
    assert found == [("Alien", "directed by", "Ridley Scott"), ("Ridley Scott", "in", "London")]


def test_a_passage_with_no_triple_gives_none_and_the_graph_keeps_new_triples_only():
    assert EXTRACTION_METHODS["nlp"].triples(_extraction(), Chunk("c1", "Nothing.", None)) == []
    graph = QueryGraph()
    assert graph.merge([("a", "p", "b"), ("a", "p", "b")]) == [("a", "p", "b")]
    assert graph.merge([("a", "p", "b"), ("b", "q", "c")]) == [("b", "q", "c")]
    assert (graph.subgraphs, graph.nodes, graph.edges) == ([[("a", "p", "b")],
                                                            [("b", "q", "c")]], 3, 2)
    assert passage("u1", "# Title\nBody text.").title == "Title"
    assert passage("u1", "No title.").title is None


def test_max_iterations_below_one_is_refused():
    with pytest.raises(KgragError, match="max_iterations must be at least 1"):
        check_iterations({"name": "ras", "max_iterations": 0})


def ras_spec(project: Path, llm_plan_entry: dict | None = None, **sections) -> Path:
    entry = {"name": "ras", "strategy": "ras", "retriever": "dense", "budget_tokens": 800,
             **(llm_plan_entry or {})}
    defaults = {"extraction": {"method": "nlp"},
                "query": [{"name": "dense", "strategy": "naive", "budget_tokens": 4000}, entry],
                "answer": {"questions": 2},
                "evaluate": {"metrics": ["em", "coverage", "recall@5", "recall@10",
                                         "iterations"]}}
    return write_spec(project, **{**defaults, **sections})


def _retrieved(session, name: str = "ras") -> pl.DataFrame:
    return pl.read_parquet(session.artefact(f"retrieve.{name}") / "retrieved.parquet")


def test_the_loop_plans_retrieves_structures_and_stops_when_sufficient(project: Path):
    path = ras_spec(project)
    llm = RuleLLM(subqueries=2)
    _steps, rows, _ = run_with(path, llm)
    session = open_with(path, llm)
    table = _retrieved(session)
    assert table.height == 3
    for trace_text, context, units in zip(table["trace"], table["context"], table["unit_ids"]):
        trace = json.loads(trace_text)
        # a plan before retrieving, one after each of the two retrievals
        assert trace["iterations"] == 2 and trace["stop"] == "sufficient"
        assert trace["plans"][0].startswith("[SUBQ]") and trace["plans"][-1] == SUFFICIENT
        first, second = trace["steps"]
        assert len(first["retrieved"]) == 5 and len(second["retrieved"]) == 5
        assert not set(first["retrieved"]) & set(second["retrieved"])  # new passages only
        assert list(units) == first["retrieved"] + second["retrieved"]
        assert second["query"] == trace["plans"][1][len("[SUBQ] "):]
        assert context.startswith("[SUBQ] ")  # the first sub-query is the question itself
        assert context.count("Retrieved Graph Information:") == 2
        added = first["triples_added"] + second["triples_added"]
        assert added == trace["graph"]["edges"] and context.count("(S> ") == added - (
            first["triples_dropped_for_budget"] + second["triples_dropped_for_budget"])
    assert set(table["llm_calls"].to_list()) == {3}
    assert max(table["context_tokens"]) <= 800  # sub-query lines and triples fit the budget
    row = rows["ras"]
    assert row["iterations"] == 2.0 and row["n_answered"] == 2
    # a loop that retrieved 10 new passages finds at least the single shot's top 5
    assert row["recall@10"] >= rows["dense"]["recall@5"]
    assert llm.calls.count("plan") == 9 and llm.calls.count("answer") == 4


def test_a_warm_rerun_makes_no_model_call(project: Path):
    path = ras_spec(project)
    run_with(path, RuleLLM())
    again = RuleLLM()
    _steps, _, _ = run_with(path, again)
    assert again.calls == []


def test_a_plan_of_none_of_the_forms_is_counted_and_read_as_sufficient(project: Path):
    path = ras_spec(project)
    llm = RuleLLM(plan="broken")
    steps, _rows, _ = run_with(path, llm)
    table = _retrieved(open_with(path, llm))
    for trace in map(json.loads, table["trace"]):
        # the first plan is no [NO_RETRIEVAL]: the question is retrieved for once
        assert trace["invalid_plans"] == 2 and trace["stop"] == "invalid_plan"
        assert trace["iterations"] == 1 and "fallback" in trace
    assert steps["retrieve.ras"]["notes"]["fallbacks"] == 3


def test_no_retrieval_answers_closed_book(project: Path):
    path = ras_spec(project)
    llm = RuleLLM(plan="no_retrieval")
    run_with(path, llm)
    table = _retrieved(open_with(path, llm))
    assert table["context"].to_list() == [""] * 3
    assert [json.loads(t)["stop"] for t in table["trace"]] == ["no_retrieval"] * 3


def test_fixed_iterations_and_raw_passages_are_the_ablations(project: Path):
    path = ras_spec(project, {"planning": "fixed", "max_iterations": 3, "evidence": "passages"},
                    extraction={"method": "nlp"})
    llm = RuleLLM()
    run_with(path, llm)
    table = _retrieved(open_with(path, llm))
    assert "plan" not in llm.calls and set(table["llm_calls"].to_list()) == {0}
    for trace, context in zip(map(json.loads, table["trace"]), table["context"]):
        assert trace["iterations"] == 3 and trace["stop"] == "max_iterations"
        assert [s["query"] for s in trace["steps"]] == [trace["steps"][0]["query"]] * 3
        assert "(S> " not in context and "# " in context  # passages, not triples


def test_spec_checks_refuse_max_iterations_below_one_and_an_unknown_retriever(project: Path):
    with pytest.raises(KgragError, match=r"query\[1\].max_iterations: must be ≥ 1, got 0"):
        load_spec(ras_spec(project, {"max_iterations": 0}))
    with pytest.raises(KgragError, match="no other query entry named 'nothing'"):
        load_spec(ras_spec(project, {"retriever": "nothing"}))


def test_a_strategy_that_does_not_rank_cannot_retrieve_for_ras(project: Path):
    path = ras_spec(project, query=[
        {"name": "sub", "strategy": "ras", "retriever": "dense"},
        {"name": "dense", "strategy": "naive"},
        {"name": "ras", "strategy": "ras", "retriever": "sub"}])
    with pytest.raises(KgragError, match="'sub' is a ras entry"):
        load_spec(path)


def test_load_refuses_a_retriever_given_by_name_only():
    with pytest.raises(KgragError, match="retriever needs the config"):
        load({"name": "ras", "strategy": "ras", "max_iterations": 5, "retriever": "dense"}, {},
             None)
