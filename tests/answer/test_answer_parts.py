"""A context is cut into citable parts: chunks by id, other layouts by their blocks."""

from __future__ import annotations

from kgrag.answer.parts import Part, context_parts

TEXT = {"c1": "# Paris\nParis is in France.", "c2": "# Lyon\nLyon is on the Rhone.\n\nIt is old."}


def test_a_chunk_context_is_cut_at_its_chunks_even_with_blank_lines_inside():
    context = "\n\n".join(TEXT[u] for u in ("c2", "c1"))
    assert context_parts(["c2", "c1"], context, TEXT) == [Part(TEXT["c2"], "c2"),
                                                          Part(TEXT["c1"], "c1")]


def test_a_sectioned_context_is_cut_into_rows_and_blocks():
    context = ("-----Entities-----\nid|entity|type|description\n1|PARIS|city|a city\n"
               "2|FRANCE|country|a country\n\n-----Sources-----\n" + TEXT["c1"]
               + "\n\nParis has a river.")
    parts = context_parts(["c1"], context, TEXT)
    assert parts == [Part("1|PARIS|city|a city", None), Part("2|FRANCE|country|a country", None),
                     Part(TEXT["c1"], "c1"), Part("Paris has a river.", None)]


def test_hugrag_items_are_parts():
    context = "Module: cities of France\n\nPARIS: a city\n\n" + TEXT["c1"]
    parts = context_parts(["c1"], context, TEXT)
    assert [p.unit_id for p in parts] == [None, None, "c1"] and len(parts) == 3
