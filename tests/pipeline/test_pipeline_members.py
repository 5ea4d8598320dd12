"""A strategy built on another entry of the spec is its module, one line in the list of
strategies, its test and the regenerated schema: the spec checks, compile and the
retrieve step handle its member without an edit.

``Reversed`` stands for such a module: its declaration names the entry it builds on
(``member_key``), and its class finds that entry's loaded strategy in
``resources.members``. The fixture does the other two steps: the line in
``kgrag.retrieval.STRATEGIES`` and the schema as ``python -m kgrag.spec.generate`` would
rewrite it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgrag import api
from kgrag.declarations import Param, Strategy
from kgrag.retrieval import STRATEGIES, Resources, load
from kgrag.retrieval.units import Evidence, Units
from kgrag.spec import check_spec
from kgrag.spec.generate import generated_schema
from kgrag.spec.schema import SpecValidator
from tests.conftest import write_spec


class Reversed:
    """The member's ranking read from the end, filled into the budget."""

    def __init__(self, member: Any, units: Units, budget: int) -> None:
        self.member, self.units, self.budget = member, units, budget

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> Reversed:
        return cls(resources.members["base"], resources.units, config["budget_tokens"])

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        return self.units.filled(self.member.ranking(question, vector)[::-1], self.budget)


REVERSED = Strategy(
    "reversed", "another entry's ranking read from the end (declared in a test).",
    (Param("base", {"type": "string", "minLength": 1}, "the entry whose ranking it reverses."),),
    Reversed, lambda config: {}, member_key="base")


@pytest.fixture
def reversed_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STRATEGIES, "reversed", REVERSED)
    schema = generated_schema()
    monkeypatch.setattr("kgrag.spec.load.SCHEMA", schema)
    monkeypatch.setattr("kgrag.spec.load.VALIDATOR", SpecValidator(schema))


def test_the_spec_checks_its_member_by_the_declaration(project: Path, reversed_strategy):
    def messages(base: str) -> list[str]:
        path = write_spec(project, graphs=[{"name": "kw", "kind": "bipartite"}], query=[
            {"name": "dense", "strategy": "naive"},
            {"name": "kw", "strategy": "ket", "bipartite": "kw", "theta": 0},
            {"name": "back", "strategy": "reversed", "base": base}])
        return [m.split(": ", 1)[1] for m in check_spec(path)]

    assert messages("dense") == []
    assert messages("nothing") == [
        "query[2].base: no other query entry named 'nothing' (known: dense, kw, back)"]
    assert messages("kw") == [("query[2].base: 'kw' is a ket entry; strategy reversed takes the "
                               "ranking of an entry of bm25, naive, ppr")]
    assert messages("back")[0].startswith("query[2].base: no other query entry named 'back'")


def test_compile_puts_the_member_in_place_and_reads_its_artefacts(project: Path,
                                                                 reversed_strategy):
    def plan(top_k: int) -> Any:
        return api.open_session(write_spec(project, query=[
            {"name": "dense", "strategy": "naive", "top_k": top_k},
            {"name": "back", "strategy": "reversed", "base": "dense"}])).plan

    first = plan(8)
    step = first.queries["back"]
    member = step.config["strategy"]["base"]
    assert member["name"] == "dense" and member["top_k"] == 8
    assert step.inputs == {"corpus": "corpus", "chunks": "chunks", "base.dense": "dense"}
    assert plan(9).queries["back"].fingerprint != step.fingerprint  # the member's config counts


def test_the_retrieve_step_loads_the_member_first(reversed_strategy):
    units = Units({"c1": "Paris is the capital of France.", "c2": "Rome is in Italy.",
                   "c3": "France borders Spain."}, {"c1": 7, "c2": 5, "c3": 5},
                  {"c1": "d1", "c2": "d2", "c3": "d1"})
    config = {"name": "back", "strategy": "reversed", "budget_tokens": 10,
              "base": {"name": "lexical", "strategy": "bm25", "budget_tokens": 10}}
    strategy = load(config, {}, Resources(units, tokenizer=None))
    assert strategy.member.ranking("capital of France", np.zeros(2)) == ["c1", "c3"]
    # c3 first, then c1 no longer fits the 10 tokens
    assert strategy.retrieve("capital of France", np.zeros(2)).unit_ids == ["c3"]
