"""The declarations are the one source of what strategies, graph kinds and extraction
methods take: the published schema is generated from them, and a new strategy is one
declaration (the schema, the reference checks and compile follow)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kgrag.declarations import NO_DEFAULT, GraphRef, Param, Strategy, TrainedRef
from kgrag.errors import KgragError
from kgrag.pipeline.graph_kinds import GRAPH_KINDS
from kgrag.retrieval import RANKERS, STRATEGIES
from kgrag.spec.generate import generated_schema
from kgrag.spec.references import prune_defaults, reference_problems
from kgrag.spec.schema import SCHEMA, SCHEMA_PATH


def test_the_published_schema_is_generated_from_the_declarations():
    assert json.loads(SCHEMA_PATH.read_text()) == generated_schema(), (
        "the schema differs from the declarations: run python -m kgrag.spec.generate")


def test_every_declared_class_retrieves_and_rankers_are_the_ones_that_rank():
    for name, declared in STRATEGIES.items():
        assert declared.name == name
        assert callable(declared.runs.load) and callable(declared.runs.retrieve)
    # a strategy built on other entries (fusion ranks too) is never a member itself
    assert set(RANKERS) == {n for n, d in STRATEGIES.items()
                            if hasattr(d.runs, "ranking") and not d.member_key}
    assert {"naive", "bm25", "ppr"} <= set(RANKERS) and "fusion" not in RANKERS


class Toy:
    """A strategy class that is never run: the test reads its declaration only."""

    load = retrieve = staticmethod(lambda *args: None)


def toy_problems(index, raw, entry, spec) -> Iterator:
    if entry["depth"] > 3 and entry["skeleton"] is None:
        yield ("query", index, "depth"), "depth above 3 walks a skeleton"


TOY = Strategy("toy", "a strategy declared in a test.", (
    Param("depth", {"type": "integer", "minimum": 1}, "how deep it looks.", default=2,
          sweep=True),
    Param("skeleton", {"type": ["string", "null"]}, "the skeleton it reads.", default=None)),
    Toy, lambda config: {"graph": GraphRef("skeleton", "extract", "toy reads entities"),
                         "dense": "dense"},
    problems=toy_problems)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STRATEGIES, "toy", TOY)


def test_a_new_strategy_is_one_declaration(toy):
    schema = generated_schema()["$defs"]["strategy"]["properties"]
    assert "toy" in schema["strategy"]["enum"]
    assert "toy: a strategy declared in a test." in schema["strategy"]["description"]
    assert schema["depth"]["type"] == ["integer", "array"] and schema["depth"]["default"] == 2
    assert "toy: how deep it looks. A list runs every value" in schema["depth"]["description"]
    # a parameter two declarations share is written once, with both takers
    assert schema["skeleton"]["description"].startswith("ket / knng / hybrid / ppr: ")
    assert "toy: the skeleton it reads." in schema["skeleton"]["description"]


def spec(*query, graphs=()) -> dict:
    return {"extraction": {"method": "llm"}, "graphs": list(graphs), "query": list(query)}


def test_references_and_defaults_follow_a_declaration(toy):
    base = {"name": "t", "strategy": "toy", "budget_tokens": 100}
    problems = list(reference_problems(spec(base), spec(base)))
    assert problems == [(("query", 0), ("strategy toy needs 'skeleton' (toy reads entities): "
                                       "the name of a skeleton graph"))]
    deep = {**base, "depth": 5, "theta": 0.4}
    messages = [m for _, m in reference_problems(spec(deep), spec(deep))]
    assert "'theta' is not a parameter of strategy toy" in messages
    assert "depth above 3 walks a skeleton" in messages
    named = {**base, "skeleton": "s"}
    graphs = [{"name": "s", "kind": "skeleton"}]
    assert list(reference_problems(spec(named, graphs=graphs), spec(named, graphs=graphs))) == []
    pruned = prune_defaults(spec({**named, "top_k": None}))["query"][0]
    assert pruned == {**named, "depth": 2}  # top_k is naive's; depth's default is declared


SCORED = Strategy("scored", "a strategy reading a trained model, declared in a test.", (
    Param("scorer", {"type": "string"}, "the training entry whose model ranks."),),
    Toy, lambda config: {"model": TrainedRef("scorer", "scorer", "scored ranks with it")})


def test_a_strategy_names_a_training_entry_that_trains_its_kind_of_model(monkeypatch):
    monkeypatch.setitem(STRATEGIES, "scored", SCORED)
    base = {"name": "s", "strategy": "scored", "budget_tokens": 100}
    training = [{"name": "ark", "method": "ark"}]
    problems = [m for _, m in reference_problems(spec(base), spec(base))]
    assert problems == [("strategy scored needs 'scorer' (scored ranks with it): the name of a "
                        "training entry")]
    named = {**base, "scorer": "ark"}  # ARK trains an embedder, not a scorer
    filled = {**spec(named), "training": training}
    assert [m for _, m in reference_problems(spec(named), filled)] == [
        "no training entry named 'ark' that trains a scorer (known: none)"]
    assert SCORED.inputs(named, {"ark": "ark_stage.ark"}) == {"model": "ark_stage.ark"}
    with pytest.raises(KgragError, match="'scorer' must name a training entry"):
        SCORED.inputs({**base, "scorer": "other"}, {"ark": "ark_stage.ark"})


def test_graph_kinds_declare_what_their_builds_write():
    assert set(GRAPH_KINDS) == set(SCHEMA["$defs"]["graph"]["properties"]["kind"]["enum"])
    # fusion's and ras's members are other entries
    for ref_kind in {need.kind for d in STRATEGIES.values() if d.name not in ("fusion", "ras")
                     for need in d.needs(_filled(d)).values() if isinstance(need, GraphRef)}:
        assert ref_kind in GRAPH_KINDS


def _filled(declared: Strategy) -> dict:
    """A config of ``declared`` with its defaults, every graph named."""
    config = {p.name: p.default for p in declared.all_params()
              if p.default is not None and p.default is not NO_DEFAULT}
    return {"name": "x", **config, **{kind: "g" for kind in GRAPH_KINDS},
            "use_hierarchy": True, "use_gates": True, "entity_seeds": "ppr",
            **({"skeleton": "g", "hierarchy": None, "entities": None}
               if declared.name == "ppr" else {})}


def test_the_schema_names_every_dataset_shape_the_importers_declare():
    from kgrag.corpus.importers import IMPORTERS

    enum = SCHEMA["$defs"]["corpus"]["properties"]["dataset"]["enum"]
    assert set(enum) == set(IMPORTERS)
