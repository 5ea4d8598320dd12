"""The salience rule: recurring entities are nodes, generic ones and one-offs are not,
and each entity keeps only its strongest relationships."""

from __future__ import annotations

import polars as pl
import pytest

from kgrag.errors import KgragError
from kgrag.graphs.salience import Salience, salient_graph


def chunks(n: int, prefix: str = "a") -> list[str]:
    return [f"{prefix}:{k}" for k in range(n)]


ENTITIES = pl.DataFrame({
    "name": ["STUDY", "OIL PALM", "PHOSPHORUS", "APASE", "ONCE"],
    "source_chunk_ids": [chunks(60), chunks(5), chunks(4, "b"), chunks(3, "c"), chunks(1)],
})
RELATIONSHIPS = pl.DataFrame({
    "source": ["OIL PALM", "OIL PALM", "PHOSPHORUS", "STUDY", "APASE"],
    "target": ["PHOSPHORUS", "APASE", "APASE", "OIL PALM", "ONCE"],
    "weight": [10, 4, 6, 50, 9],
})


def test_recurring_entities_are_nodes_and_generic_or_rare_ones_are_not() -> None:
    entities, relationships = salient_graph(ENTITIES, RELATIONSHIPS, Salience(3, 0.5, 2), 100)
    assert entities["name"].to_list() == ["OIL PALM", "PHOSPHORUS", "APASE"]
    # STUDY is in 60 % of the chunks (generic); ONCE in one chunk: their edges go too
    assert relationships.select("source", "target").rows() == [
        ("OIL PALM", "PHOSPHORUS"), ("OIL PALM", "APASE"), ("PHOSPHORUS", "APASE")]


def test_each_entity_keeps_only_its_strongest_relationships() -> None:
    _, relationships = salient_graph(ENTITIES, RELATIONSHIPS, Salience(3, 0.5, 1), 100)
    # OIL PALM's and PHOSPHORUS's strongest is their edge (10); APASE's is PHOSPHORUS (6);
    # OIL PALM -- APASE (4) is nobody's strongest
    assert relationships.select("source", "target").rows() == [
        ("OIL PALM", "PHOSPHORUS"), ("PHOSPHORUS", "APASE")]


def test_a_rule_that_keeps_fewer_than_two_entities_is_one_clear_error() -> None:
    with pytest.raises(KgragError, match=r"keeps 1 of 5 entities .* at least two"):
        salient_graph(ENTITIES, RELATIONSHIPS, Salience(5, 0.5, 1), 100)
