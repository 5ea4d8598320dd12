"""Strategy ppr's ``walk: push`` on a real graph: spaCy's entities of a real 2Wiki slice,
walked by the power iteration and by the local push, and the option in the spec."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from kgrag import api
from kgrag.retrieval.bm25 import Bm25Index, Bm25Strategy
from kgrag.retrieval.fusion import FusionStrategy
from kgrag.retrieval.ppr import PprStrategy
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.units import Units
from kgrag.retrieval.walk_params import PUSH_PAST, walk_of
from kgrag.steps.retrieve import load_strategy
from tests.conftest import SHARED_DATA, write_spec
from tests.pipeline.test_pipeline_ppr import run_cli
from tests.retrieval.test_retrieval_bm25_fusion import eager_rrf
from tests.standin import RuleLLM, open_with, run_with

QUERY = [{"name": "power", "strategy": "ppr", "entities": "ents", "walk": "power",
          "budget_tokens": 600},
         {"name": "push", "strategy": "ppr", "entities": "ents", "walk": "push",
          "budget_tokens": 600},
         {"name": "fine", "strategy": "ppr", "entities": "ents", "walk": "push",
          "push_epsilon": 1e-9, "budget_tokens": 600}]


@pytest.fixture
def spec(project: Path) -> Path:
    """The first 2Wiki question that has paragraphs, with an nlp entities graph."""
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        first = next(line for line in handle if '"context"' in line)
    (project / "2wiki.jsonl").write_text(first)
    path = write_spec(project, "push", corpus={"dataset": "2wiki", "path": "../2wiki.jsonl"},
                      extraction={"method": "nlp"}, graphs=[{"name": "ents", "kind": "entities"}],
                      query=QUERY, answer={"questions": 0},
                      evaluate={"metrics": ["coverage", "recall@5"]})
    # YAML reads 1e-09 as a string: a number in exponent form needs its dot
    path.write_text(path.read_text().replace("1e-09", "1.0e-9"))
    return path


def searches(spec: Path, question: str) -> tuple[dict[str, PprSearch], np.ndarray]:
    """Each retrieve step's search as the run loaded it, and the question's vector."""
    session = open_with(spec, RuleLLM())
    found, embedder = {}, None
    for step in session.plan.steps:
        if step.kind == "retrieve":
            inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
            found[step.name] = load_strategy(step.config, inputs, session.models).search
            embedder = session.models.embedder_of(step.config["embedder"])
    assert embedder is not None
    return found, embedder.encode([question])[0]


def test_the_push_walk_converges_to_the_power_walk_on_a_real_graph(spec: Path) -> None:
    _, rows, _ = run_with(spec, RuleLLM())
    assert {"power", "push", "fine"} <= set(rows)
    with (spec.parent.parent / "2wiki.jsonl").open() as handle:
        question = json.loads(handle.readline())["question"]
    walked, vector = searches(spec, question)
    power, push = walked["retrieve.power"], walked["retrieve.fine"]
    assert power.push_epsilon is None and push.push_epsilon == 1e-9
    assert walked["retrieve.push"].push_epsilon == 1e-5  # left out: the chosen default
    walk = power.walk
    assert walk.n > 50  # spaCy's named phrases of ten paragraphs and their chunks
    # from the best-connected entity and from a chunk: the push's L1 error is the one it
    # reports, and it shrinks with ε to under 1e-6 of the unit mass
    hub = int(np.argmax(np.diff(walk.adjacency.indptr)[: len(power.graph.names)]))
    for start in (hub, walk.n - 1):
        restart = np.zeros(walk.n)
        restart[start] = 1.0
        exact = walk.run(restart, 0.5, tol=1e-13, max_steps=200)
        errors = []
        for epsilon in (1e-4, 1e-6, 1e-9):
            nodes, mass, error = walk.push(np.array([start]), np.array([1.0]), 0.5, epsilon)
            estimate = np.zeros(walk.n)
            estimate[nodes] = mass
            assert np.abs(exact - estimate).sum() == pytest.approx(error, abs=1e-9)
            errors.append(error)
        assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-6
    # a question's whole search: at ε = 1e-9 the push ranks the chunks as the power walk
    ranked_power, mass_power, _ = power.scored(question, vector)
    ranked_push, mass_push, _ = push.scored(question, vector)
    assert ranked_push[:5] == ranked_power[:5]
    for chunk in ranked_power[:5]:
        assert mass_push.get(chunk, 0.0) == pytest.approx(mass_power.get(chunk, 0.0), abs=1e-6)


def test_walk_and_push_epsilon_join_the_fingerprint_and_the_power_walk_keeps_its_own(
        spec: Path) -> None:
    steps = {s.name: s for s in api.open_session(spec).plan.steps}
    configs = {name: steps[f"retrieve.{name}"].config["strategy"] for name in
               ("power", "push", "fine")}
    assert "walk" not in configs["power"] and "push_epsilon" not in configs["power"]
    assert configs["push"]["walk"] == "push" and "push_epsilon" not in configs["push"]
    assert configs["fine"]["push_epsilon"] == 1e-9
    prints = {steps[f"retrieve.{name}"].fingerprint for name in configs}
    assert len(prints) == 3
    # walk: power written out keeps the fingerprint of a landed spec that left the walk
    # out; left out now, it is auto, with a fingerprint of its own
    sections = {k: v for k, v in json.loads(spec.read_text()).items() if k != "name"}
    left_out = {k: v for k, v in QUERY[0].items() if k != "walk"}
    auto = write_spec(spec.parent.parent, "push", **{**sections, "query": [left_out]})
    again = {s.name: s for s in api.open_session(auto).plan.steps}
    assert again["retrieve.power"].config["strategy"]["walk"] == "auto"
    assert again["retrieve.power"].fingerprint != steps["retrieve.power"].fingerprint


def test_auto_walks_by_power_up_to_its_threshold_and_pushes_past_it() -> None:
    assert walk_of({"walk": "auto"}, PUSH_PAST) == "power"
    assert walk_of({"walk": "auto"}, PUSH_PAST + 1) == "push"
    assert walk_of({}, 10 * PUSH_PAST) == "power"  # a landed spec's power walk, dropped
    assert walk_of({"walk": "push"}, 10) == "push"


@pytest.mark.parametrize("entry, message", [
    ({"walk": "local"}, "walk"),
    ({"walk": "push", "push_epsilon": 0}, "push_epsilon"),
    ({"walk": "push", "push_epsilon": 1.5}, "push_epsilon"),
    ({"walk": "power", "push_epsilon": 0.001},
     "push_epsilon is the tolerance of the push walk; set walk: push or auto"),
])
def test_bad_walk_settings_exit_2_with_one_message(project: Path, capsys, entry, message):
    query = [{"name": "p", "strategy": "ppr", "entities": "ents", **entry}]
    path = write_spec(project, graphs=[{"name": "ents", "kind": "entities"}], query=query)
    code, _, err = run_cli(capsys, "run", str(path), "--dry-run")
    assert code == 2
    assert message in err and err.startswith("kgrag: error:")
    assert "Traceback" not in err


def doubled(search: PprSearch, units: Units, push_epsilon: float | None
            ) -> tuple[PprSearch, Units]:
    """``search`` with every chunk twice (``c`` and ``c#1``: the same entities, the same
    vector, so the copies tie in mass and in similarity and rank in chunk order), three
    dense seed chunks (a tie at the cut), and the units of both copies."""
    graph = search.graph
    n = len(graph.names)
    a = graph.adjacency
    chunks = a[n:, n:]
    adjacency = sp.bmat([[a[:n, :n], a[:n, n:], a[:n, n:]], [a[n:, :n], chunks, None],
                         [a[n:, :n], None, chunks]], format="csr")
    twice = dataclasses.replace(graph, chunk_ids=graph.chunk_ids + [f"{c}#1" for c in
                                                                    graph.chunk_ids],
                                adjacency=adjacency, mentions=graph.mentions * 2)
    doubled_search = PprSearch(twice, np.vstack([search.chunk_matrix] * 2),
                               damping=search.damping, max_iterations=search.max_iterations,
                               dense_seeds=0.5, dense_seed_chunks=3, push_epsilon=push_epsilon)

    def both(column: dict) -> dict:
        return {**column, **{f"{c}#1": v for c, v in column.items()}}
    return doubled_search, Units(both(units.text), both(units.tokens), both(units.doc))


def test_ppr_contexts_are_those_of_the_fully_sorted_ranking(
        spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: every chunk sorted by dense similarity and the context filled from the whole
    ranking. Now the dense seeds are partitioned out and the context is filled from the
    ranking sorted only as far as the fill reads it: on a real graph whose every chunk is
    there twice (ties everywhere, broken by chunk order), the dense seeds, the ranking
    fusion reads and each context (its chunks, masses and trace) are those of a stable sort
    of every chunk, for both walks, for questions that walk and one that falls back. So
    are the contexts and rankings of ppr's fusion with BM25, which reads ppr's ranking
    only as deep as it needs (``PprSearch.reading``), in both member orders."""
    run_with(spec, RuleLLM())
    session = open_with(spec, RuleLLM())
    step = next(s for s in session.plan.steps if s.name == "retrieve.power")
    inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
    strategy = load_strategy(step.config, inputs, session.models)
    embedder = session.models.embedder_of(step.config["embedder"])
    names = strategy.search.graph.names
    questions = [f"Where was {names[i]} from, and who knew {names[i + 1]}?"
                 for i in range(0, min(len(names) - 1, 16), 2)] + ["Is water wet?"]
    vectors = embedder.encode(questions)
    restarts: list[np.ndarray] = []  # the restart nodes of each walk
    for epsilon in (None, 1e-6):
        search, units = doubled(strategy.search, strategy.units, epsilon)
        n, m = len(names), len(search.graph.chunk_ids)
        monkeypatch.setattr(search, "_walk", lambda nodes, restart, walk=search._walk:
                            restarts.append(nodes) or walk(nodes, restart))
        tied = 0
        lexical = Bm25Index(units)
        for question, vector in zip(questions, vectors):
            restarts.clear()
            mass, dense, _ = search.run(question, vector)
            dense_order = np.argsort(-dense.similarity, kind="stable")
            if mass is None:
                expected = dense_order
            else:
                assert list(restarts[0][-3:]) == list(n + dense_order[:3])
                chunk_mass = mass[n:]
                tied += int((chunk_mass[: m // 2] == chunk_mass[m // 2:]).sum())
                rank = np.empty(m, dtype=np.int64)
                rank[dense_order] = np.arange(m)
                held = [j for j in dense_order if chunk_mass[j] > 0]
                expected = sorted(held, key=lambda j: (-chunk_mass[j], rank[j])) + [
                    j for j in dense_order if not chunk_mass[j] > 0]
            ranking = [search.graph.chunk_ids[j] for j in expected]
            assert search.scored(question, vector)[0] == ranking
            for budget in (60, 250, 600, 5000):
                context = PprStrategy(search, units, budget).retrieve(question, vector)
                for members, rankings in [
                        ((PprStrategy(search, units, budget), Bm25Strategy(lexical, units, budget)),
                         (ranking, lexical.ranked(question))),
                        ((Bm25Strategy(lexical, units, budget), PprStrategy(search, units, budget)),
                         (lexical.ranked(question), ranking))]:
                    for k in (1, 60):
                        fusion = FusionStrategy(list(members), units, budget, k)
                        eager = eager_rrf(list(rankings), k)
                        assert fusion.retrieve(question, vector) == units.filled(eager, budget)
                        assert fusion.ranking(question, vector) == eager
                assert context.unit_ids == units.filled(ranking, budget).unit_ids
                _, scores, trace = search.scored(question, vector)
                assert context.trace["scores"] == {c: round(scores.get(c, 0.0), 8)
                                                   for c in context.unit_ids}
                assert context.trace["seeds"] == trace["seeds"]
                if "reached" in trace:  # the edges among its entities and chunks
                    near = [*trace["seeds"], *trace["reached"]]
                    node = {name: i for i, name in enumerate(names)}
                    at = {c: n + j for j, c in enumerate(search.graph.chunk_ids)}
                    edge = search.graph.adjacency.toarray() != 0
                    assert context.trace["subgraph"] == {
                        "mentions": [[e, c] for e in near for c in context.unit_ids
                                     if edge[node[e], at[c]]],
                        "relations": [[a, b] for k, a in enumerate(near) for b in near[k + 1:]
                                      if edge[node[a], node[b]]]}
        assert tied > 10  # copies that tie in mass: their order is the chunk order
