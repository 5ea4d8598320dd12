"""Gold-triple metrics on hand-made tables: aliases, scope, entity and triple recall in
either direction, the soft relation match."""

from __future__ import annotations

import polars as pl

from kgrag.corpus.corpus import TRIPLE_SCHEMA
from kgrag.eval.gold import aliases, evidence_chunks, gold_scores, relation_matches
from kgrag.graphs.merge import ENTITY_FRAME_SCHEMA, RELATIONSHIP_FRAME_SCHEMA

UNITS = {
    "c1": "# Free Guy\nFree Guy is a 2020 film directed by Shawn Levy.",
    "c2": "# Shawn Levy\nShawn Adam Levy (born July 23, 1968) is a Canadian film director.",
    "c3": "# Pál Gábor\nPál Gábor (2 November 1932 – 21 October 1987) was a director.",
}


def triples(*rows: tuple[str, str, str]) -> pl.DataFrame:
    return pl.DataFrame([("q1", *row) for row in rows], schema=TRIPLE_SCHEMA, orient="row")


def entities(*rows: tuple[str, list[str]]) -> pl.DataFrame:
    return pl.DataFrame([{"name": n, "type": "other", "description": "",
                          "source_chunk_ids": chunks, "grounded": True} for n, chunks in rows],
                        schema=ENTITY_FRAME_SCHEMA)


def relationships(*rows: tuple[str, str, str, list[str]]) -> pl.DataFrame:
    return pl.DataFrame([{"source": s, "target": t, "description": d, "strength": 5.0,
                          "weight": 5, "source_chunk_ids": chunks, "grounded": True}
                         for s, t, d, chunks in rows], schema=RELATIONSHIP_FRAME_SCHEMA)


def test_aliases_are_normalised_and_tolerate_qualifiers_and_middle_names() -> None:
    assert aliases("Pál Gábor") == aliases("PAL GABOR") == {"pal gabor"}
    assert "the zone" in aliases("The Zone (2017 film)") and "zone" in aliases("The Zone")
    assert "thomas stanley" in aliases("Thomas Stanley, 1st Earl of Derby")
    assert "montreal" in aliases("Montreal, Quebec")
    assert aliases("July 23, 1968") == {"july 23 1968"}  # a date keeps its year
    assert "shawn levy" in aliases("SHAWN ADAM LEVY")
    assert aliases("2 November 1932") == {"2 november 1932"}


def test_relation_match_is_a_soft_lexical_match() -> None:
    assert relation_matches("director", "directed by: Free Guy is a film directed by him")
    assert relation_matches("date of birth", "born: Shawn Adam Levy (born July 23, 1968)")
    assert not relation_matches("date of death", "born: Shawn Adam Levy (born July 23, 1968)")
    # a relation without cues matches the first five letters of its own words
    assert relation_matches("screenwriter", "Penn wrote the film's screenplay")
    assert not relation_matches("screenwriter", "The film was written by Zak Penn")


def test_evidence_is_the_units_that_mention_subject_and_object() -> None:
    evidence = evidence_chunks(triples(("Free Guy", "director", "Shawn Levy"),
                                       ("Shawn Levy", "date of birth", "July 23, 1968"),
                                       ("Free Guy", "director", "Shawn Levy")), UNITS)
    assert evidence == {("Free Guy", "director", "Shawn Levy"): {"c1"},
                        ("Shawn Levy", "date of birth", "July 23, 1968"): {"c2"}}


def test_recalls_count_relationships_either_way_within_the_evidence_chunks() -> None:
    gold = triples(("Free Guy", "director", "Shawn Levy"),
                   ("Shawn Levy", "date of birth", "July 23, 1968"),
                   ("Pál Gábor", "date of death", "21 October 1987"),
                   ("Atlantis", "country", "Nowhere"))  # in no unit: out of scope
    found = entities(("FREE GUY", ["c1"]), ("SHAWN LEVY", ["c1", "c2"]),
                     ("JULY 23, 1968", ["c2"]), ("PAL GABOR", ["c3"]),
                     ("21 OCTOBER 1987", ["c3"]))
    joined = relationships(
        ("SHAWN LEVY", "FREE GUY", "directed by: Free Guy is a film directed by Shawn Levy",
         ["c1"]),  # reversed: still the triple
        ("SHAWN LEVY", "JULY 23, 1968", "Shawn Adam Levy (July 23, 1968)", ["c2"]),
        ("PAL GABOR", "21 OCTOBER 1987", "died: Pál Gábor (... – 21 October 1987)", ["c1"]))
    scores = gold_scores(gold, UNITS, found, joined)
    assert (scores.gold_triples, scores.in_scope) == (4, 3)
    assert scores.entity_recall == 1.0
    # Gábor's relationship names another chunk than the one the fact is stated in
    assert scores.triple_recall == round(2 / 3, 4)
    assert scores.relation_match == round(1 / 3, 4)  # Levy's birth date is unlabelled


def test_a_triple_counts_only_where_the_build_extracted() -> None:
    gold = triples(("Free Guy", "director", "Shawn Levy"), ("Pál Gábor", "x", "1987"))
    only_c3 = {"c3": UNITS["c3"]}
    scores = gold_scores(gold, only_c3, entities(), relationships())
    assert (scores.in_scope, scores.entity_recall, scores.triple_recall) == (1, 0.0, 0.0)
    none = gold_scores(gold, {}, entities(), relationships())
    assert none.in_scope == 0 and none.triple_recall is None
    assert none.as_row()["gold_triples"] == 2
