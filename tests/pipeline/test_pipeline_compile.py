"""Compiling specs into plans: graph builds, strategy references and sweeps."""

from __future__ import annotations

import dataclasses

import pytest

from kgrag import api
from kgrag.configuration import NAME_MAX, freeze
from kgrag.declarations import Strategy
from kgrag.errors import KgragError
from kgrag.pipeline.artefacts import TEMP_PREFIX
from kgrag.pipeline.compile import compile_plan
from kgrag.retrieval import STRATEGIES
from kgrag.spec import thaw
from kgrag.spec.schema import SCHEMA
from kgrag.sweeps import label, variants
from tests.conftest import write_spec

GRAPHS = [{"name": "skel", "kind": "skeleton", "beta": [0.2, 1.0]},
          {"name": "kw", "kind": "bipartite", "tau": 1}]


def steps(spec) -> dict:
    return {s.name: s for s in api.open_session(spec).plan.steps}


def test_variants_and_labels():
    chosen = variants({"name": "x", "beta": [0.2, 0.8], "tau": 1}, ("beta", "tau"))
    assert [c for c, _ in chosen] == [{"beta": 0.2}, {"beta": 0.8}]
    assert chosen[1][1] == {"name": "x", "beta": 0.8, "tau": 1}
    assert label("skel", {"beta": 0.2, "theta": 0.4}) == "skel@beta=0.2,theta=0.4"
    assert label("skel", {}) == "skel"


def test_a_beta_sweep_builds_one_skeleton_per_value_sharing_the_rest(project):
    spec = write_spec(project, graphs=GRAPHS, query=[
        {"name": "text", "strategy": "naive"},
        {"name": "kw", "strategy": "ket", "bipartite": "kw", "theta": 0}])
    plan = steps(spec)
    assert {"core.skel@beta=0.2", "extract.skel@beta=1.0", "skeleton.skel@beta=1.0",
            "bipartite.kw"} <= set(plan)
    assert plan["extract.skel@beta=0.2"].inputs["chunks"] == "chunks"
    assert plan["retrieve.kw"].inputs == {"corpus": "corpus", "chunks": "chunks",
                                          "bipartite": "bipartite.kw"}
    # the chunking every variant shares is one step with one fingerprint
    assert plan["core.skel@beta=0.2"].inputs["chunks"] == plan["bipartite.kw"].inputs["chunks"]


def test_a_theta_sweep_reuses_every_index_step(project):
    query = [{"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
              "theta": [0.0, 0.5]}]
    one = steps(write_spec(project, name="one", graphs=GRAPHS, query=query))
    rows = sorted(n for n in one if n.startswith("retrieve."))
    assert rows == ["retrieve.ket@beta=0.2,theta=0.0", "retrieve.ket@beta=0.2,theta=0.5",
                    "retrieve.ket@beta=1.0,theta=0.0", "retrieve.ket@beta=1.0,theta=0.5"]
    query[0]["theta"] = [0.0, 0.5, 1.0]
    two = steps(write_spec(project, name="two", graphs=GRAPHS, query=query))
    index = [n for n in one if n.split(".")[0] in ("core", "extract", "skeleton", "bipartite")]
    assert all(one[n].fingerprint == two[n].fingerprint for n in index)
    assert one["evaluate"].config["params"]["ket@beta=1.0,theta=0.5"] == {"beta": 1.0,
                                                                          "theta": 0.5}


@pytest.mark.parametrize("graphs, query, message", [
    (GRAPHS, [{"name": "k", "strategy": "ket", "theta": 0.4, "bipartite": "kw"}],
     "strategy ket needs 'skeleton' (theta=0.4 gives the skeleton part of the budget)"),
    (GRAPHS, [{"name": "k", "strategy": "ket", "theta": 0, "bipartite": "nope"}],
     "no bipartite graph named 'nope'"),
    (GRAPHS, [{"name": "k", "strategy": "naive", "theta": 0.4}],
     "'theta' is not a parameter of strategy naive"),
    ([{"name": "kw", "kind": "bipartite", "beta": 0.5}], [{"name": "t", "strategy": "naive"}],
     "'beta' is not a parameter of a bipartite graph"),
    ([{"name": "s", "kind": "skeleton", "beta": 1.5}], [{"name": "t", "strategy": "naive"}],
     "graphs[0].beta: must be ≤ 1, got 1.5"),
    (GRAPHS, [{"name": "h", "strategy": "hugrag"}],
     ("strategy hugrag needs 'hierarchy' (hugrag retrieves over a hierarchy build): the name "
     "of a hierarchy graph")),
    (GRAPHS, [{"name": "h", "strategy": "hugrag", "hierarchy": "skel"}],
     "no hierarchy graph named 'skel'"),
    ([{"name": "h", "kind": "hierarchy", "tau": 1}], [{"name": "t", "strategy": "naive"}],
     "'tau' is not a parameter of a hierarchy graph"),
    ([{"name": "h", "kind": "hierarchy"}],
     [{"name": "t", "strategy": "hugrag", "hierarchy": "h", "theta": 0.4}],
     "'theta' is not a parameter of strategy hugrag"),
])
def test_bad_references_and_parameters_are_spec_errors(project, graphs, query, message):
    spec = write_spec(project, graphs=graphs, query=query)
    with pytest.raises(KgragError) as err:
        api.open_session(spec)
    assert message in str(err.value)


def test_theta_defaults_depend_on_the_strategy(project):
    plan = steps(write_spec(project, graphs=GRAPHS, query=[
        {"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw"},
        {"name": "hybrid", "strategy": "hybrid", "skeleton": "skel"},
        {"name": "text", "strategy": "naive"}]))
    theta = {n.split("@")[0]: s.config["strategy"].get("theta")
             for n, s in plan.items() if n.startswith("retrieve.")}
    assert theta == {"retrieve.ket": 0.4, "retrieve.hybrid": 0.5, "retrieve.text": None}


def test_a_hierarchy_build_is_four_steps_sharing_extraction_with_a_skeleton(project):
    graphs = [{"name": "h", "kind": "hierarchy"}, {"name": "kg", "kind": "skeleton",
                                                   "beta": 1.0}]
    query = [{"name": "hug", "strategy": "hugrag", "hierarchy": "h"},
             {"name": "flat", "strategy": "hugrag", "hierarchy": "h", "use_hierarchy": False,
              "causal_filter": False}]
    plan = steps(write_spec(project, graphs=graphs, query=query))
    assert plan["extract.h"].inputs == {"chunks": "chunks"}
    assert plan["extract.h"].config["beta"] == 1.0
    assert plan["gates.h"].inputs == {"hierarchy": "hierarchy.h", "summaries": "summaries.h"}
    # the filter's LLM joins the fingerprint of the strategy that calls it, only that one
    assert "llm" in plan["retrieve.hug"].config and "llm" not in plan["retrieve.flat"].config
    assert set(plan["retrieve.flat"].inputs) == {"corpus", "chunks", "hierarchy", "dense"}
    assert plan["evaluate"].inputs["graph.hug"] == "hierarchy.h"


def test_the_longest_names_and_sweep_values_fit_in_a_folder_name(project):
    """Step names become folder names: the schema's caps on names and swept values keep
    even the longest step's temp folder within the bytes a file name may have."""
    definitions = SCHEMA["$defs"]
    cap = SCHEMA["properties"]["name"]["maxLength"]
    assert definitions["strategy"]["properties"]["name"]["maxLength"] == cap
    assert definitions["graph"]["properties"]["name"]["maxLength"] == cap
    knn_k = definitions["graph"]["properties"]["knn_k"]["items"]["maximum"]
    budget = definitions["strategy"]["properties"]["budget_tokens"]["items"]["maximum"]
    tiny = 2.2250738585072014e-308  # no float in [0, 1] has a longer repr
    skeleton, bipartite, strategy = "s" * cap, "b" * cap, "q" * cap
    spec = write_spec(project, name="r" * cap, graphs=[
        {"name": skeleton, "kind": "skeleton", "beta": [tiny, 1], "knn_k": [2, knn_k]},
        {"name": bipartite, "kind": "bipartite", "tau": [0, 6]},
        {"name": "h" * cap, "kind": "hierarchy"}],
        query=[{"name": strategy, "strategy": "ket", "skeleton": skeleton,
                "bipartite": bipartite, "theta": [tiny, 1], "budget_tokens": [1, budget]}])
    session = api.open_session(spec)
    pid_max = 4194304  # Linux's largest process id, in the temp folder's name
    longest = max(len(f"{TEMP_PREFIX}{session.artefact(step.name).name}-{pid_max}")
                  for step in session.plan.steps)
    assert longest <= NAME_MAX


class TripleRanker:
    """A strategy class that is never run: the test compiles a plan only."""

    load = retrieve = staticmethod(lambda *args: None)


def test_the_plan_chunks_the_corpus_only_when_something_reads_chunks(project, monkeypatch):
    """A strategy whose evidence is not chunks (a knowledge graph's triples) reads no chunk
    step, and a plan of such strategies alone chunks nothing."""
    monkeypatch.setitem(STRATEGIES, "triples", Strategy(
        "triples", "a strategy over triples.", (), TripleRanker, lambda config: {},
        evidence="triples"))
    session = api.open_session(write_spec(project, query=[{"name": "d", "strategy": "naive"}],
                                          evaluate={"metrics": ["em", "f1"]}))
    data = thaw(session.spec.data)
    triples = {"name": "t", "strategy": "triples", "budget_tokens": 100}

    def plan_of(*query):
        spec = dataclasses.replace(session.spec, data=freeze({**data, "query": list(query)}))
        return compile_plan(spec, session.models)

    alone = plan_of(triples)
    assert [s.name for s in alone.steps][:1] == ["corpus"]
    assert not {"chunks", "dense"} & {s.name for s in alone.steps}
    assert alone.queries["t"].inputs == {"corpus": "corpus"}
    assert "chunks" not in alone.by_name()["evaluate"].inputs
    beside = plan_of(triples, thaw(session.spec.query[0]))
    assert {"chunks", "dense"} <= {s.name for s in beside.steps}
    assert beside.queries["t"].inputs == {"corpus": "corpus"}
    assert beside.queries["d"].inputs == {"corpus": "corpus", "chunks": "chunks",
                                          "dense": "dense"}


def test_ann_settings_join_the_dense_index_fingerprint_only_when_given(project):
    """Left out, dense_index.ann keeps the landed plans' fingerprints (a flat scan); given,
    its settings for the chosen index type are the dense step's, so a change of any of
    them rebuilds the index and everything that searched it, and nothing else."""
    query = [{"name": "dense", "strategy": "naive"}, {"name": "bm25", "strategy": "bm25"}]
    flat = steps(write_spec(project, query=query))
    assert "ann" not in flat["dense"].config
    assert steps(write_spec(project, query=query, dense_index={})) == flat
    hnsw = steps(write_spec(project, query=query, dense_index={"ann": {}}))
    assert hnsw["dense"].config["ann"] == {"min_rows": 100000, "index": "ivf_hnsw_sq",
                                           "m": 20, "ef_construction": 300, "nprobes": 20,
                                           "ef": 1000}
    probes = steps(write_spec(project, query=query, dense_index={"ann": {"nprobes": 40}}))
    pq = steps(write_spec(project, query=query, dense_index={
        "ann": {"index": "ivf_pq", "sub_vectors": 48, "m": 8, "refine_factor": 10}}))
    assert pq["dense"].config["ann"] == {"min_rows": 100000, "index": "ivf_pq",
                                         "sub_vectors": 48, "nprobes": 20, "refine_factor": 10}
    changed = {name for name in flat if hnsw[name].fingerprint != flat[name].fingerprint}
    assert changed == {"dense", "retrieve.dense", "answer.dense", "evaluate"}
    assert len({p["dense"].fingerprint for p in (flat, hnsw, probes, pq)}) == 4
    with pytest.raises(KgragError, match="dense_index"):
        steps(write_spec(project, query=query, dense_index={"ann": {"index": "hnsw"}}))
