"""Two-stage entity canonicalisation (HugRAG App. B.1)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from kgrag.errors import KgragError
from kgrag.graphs import name_pairs
from kgrag.graphs.canonical import canonicalise
from kgrag.graphs.merge import ENTITY_FRAME_SCHEMA, RELATIONSHIP_FRAME_SCHEMA
from kgrag.graphs.name_pairs import distinct_identifiers
from kgrag.graphs.names import surface_key


def entity(name, chunks=("c1",), kind="person", description="", grounded=True):
    return {"name": name, "type": kind, "description": description or f"about {name}",
            "source_chunk_ids": list(chunks), "grounded": grounded}


def rel(source, target, strength=5.0, weight=5, chunks=("c1",), description="", grounded=True):
    return {"source": source, "target": target,
            "description": description or f"{source} with {target}", "strength": strength,
            "weight": weight, "source_chunk_ids": list(chunks), "grounded": grounded}


def frames(entities, relationships=()):
    return (pl.DataFrame(entities, schema=ENTITY_FRAME_SCHEMA),
            pl.DataFrame(list(relationships), schema=RELATIONSHIP_FRAME_SCHEMA))


class FakeEmbed:
    """Chosen vectors per name (given in the first 8 dimensions, zero-padded); other
    names get orthogonal one-hots in the remaining dimensions. Records every call."""

    def __init__(self, chosen=None):
        self.chosen, self.calls = dict(chosen or {}), []

    def __call__(self, names):
        self.calls.append(list(names))
        rows = np.zeros((len(names), 8 + len(names)))
        for i, name in enumerate(names):
            if name in self.chosen:
                given = np.asarray(self.chosen[name], dtype=np.float64)
                rows[i, :len(given)] = given
            else:
                rows[i, 8 + i] = 1.0
        return rows


def names_of(result):
    return result.entities["name"].to_list()


def test_surface_variants_merge_and_different_names_stay_apart():
    ents, rels = frames([
        entity("J. BIDEN", chunks=("c1",)), entity("JOE BIDEN", chunks=("c2", "c3")),
        entity("BARACK OBAMA", chunks=("c1", "c2")), entity("BARAK OBAMA"),
        entity("APPLE INC."), entity("APPLE INC", chunks=("c4", "c5")),
        entity("JOHN SMITH"), entity("JANE SMITH"),
        entity("WORLD WAR I"), entity("WORLD WAR II"),
        entity("APOLLO 11"), entity("APOLLO 13"),
        entity("BANK"), entity("BANK OF AMERICA"),
    ])
    result = canonicalise(ents, rels, FakeEmbed())
    assert result.aliases == {"J. BIDEN": "JOE BIDEN", "BARAK OBAMA": "BARACK OBAMA",
                              "APPLE INC.": "APPLE INC"}
    assert result.fuzzy_merges == 3 and result.embedding_merges == 0
    assert names_of(result) == sorted(["JOE BIDEN", "BARACK OBAMA", "APPLE INC", "JOHN SMITH",
                                       "JANE SMITH", "WORLD WAR I", "WORLD WAR II",
                                       "APOLLO 11", "APOLLO 13", "BANK", "BANK OF AMERICA"])


def test_ambiguous_initials_merge_with_nothing():
    ents, rels = frames([entity("J. SMITH"), entity("JOHN SMITH"), entity("JANE SMITH")])
    result = canonicalise(ents, rels, FakeEmbed())
    assert result.aliases == {} and result.fuzzy_merges == 0


def test_fuzzy_threshold_is_applied():
    ents, rels = frames([entity("JOHN SMITH", chunks=("a", "b")), entity("JANE SMITH")])
    assert canonicalise(ents, rels, FakeEmbed()).aliases == {}
    loose = canonicalise(ents, rels, FakeEmbed(), fuzzy=0.8)  # ratio is exactly 0.80
    assert loose.aliases == {"JANE SMITH": "JOHN SMITH"}


def test_identifier_guard():
    assert surface_key("U.S.A.") == "USA" and surface_key("J. Bidén") == "J BIDEN"
    assert distinct_identifiers("WORLD WAR I", "WORLD WAR II")
    assert distinct_identifiers("APOLLO 11", "APOLLO 13")
    assert distinct_identifiers("PROTEIN KINASE A", "PROTEIN KINASE C")
    assert distinct_identifiers("PROTEIN KINASE", "PROTEIN KINASE A")
    assert distinct_identifiers("MR SMITH", "MRS SMITH")
    assert not distinct_identifiers("BARAK OBAMA", "BARACK OBAMA")
    assert not distinct_identifiers("USA", "UNITED STATES")  # no shared token
    assert not distinct_identifiers("US ARMY", "UNITED STATES ARMY")  # acronym
    assert not distinct_identifiers("THE BEATLES", "BEATLES")  # filler


def test_canonical_name_is_most_evidence_then_shortest_then_alphabetical():
    most = frames([entity("BARAK OBAMA", chunks=("a", "b", "c")), entity("BARACK OBAMA")])
    assert names_of(canonicalise(*most, FakeEmbed())) == ["BARAK OBAMA"]
    shortest = frames([entity("ACME CORP."), entity("ACME CORP")])
    assert names_of(canonicalise(*shortest, FakeEmbed())) == ["ACME CORP"]
    alphabetical = frames([entity("GRAYS"), entity("GREYS")])
    result = canonicalise(*alphabetical, FakeEmbed(), fuzzy=0.8)
    assert names_of(result) == ["GRAYS"] and result.aliases == {"GREYS": "GRAYS"}


def test_embedding_stage_merges_chosen_vectors_and_normalises_raw_ones():
    embed = FakeEmbed({
        "USA": [10.0, 0.0, 0.0, 0.0],                    # raw, not unit length
        "UNITED STATES": [0.97, 0.243, 0.0, 0.0],        # cosine 0.970 with USA
        "CANADA": [0.9, 0.0, 0.436, 0.0],                # cosine 0.90: below 0.93
    })
    ents, rels = frames([entity("USA", chunks=("a", "b")), entity("UNITED STATES"),
                         entity("CANADA"), entity("U.S.A")])
    result = canonicalise(ents, rels, embed)
    assert embed.calls == [["CANADA", "UNITED STATES", "USA"]]  # stage-1 names, sorted
    assert result.aliases == {"U.S.A": "USA", "UNITED STATES": "USA"}
    assert result.fuzzy_merges == 1 and result.embedding_merges == 1
    assert names_of(result) == ["CANADA", "USA"]
    looser = canonicalise(ents, rels, embed, cosine=0.85)
    assert looser.embedding_merges == 2 and names_of(looser) == ["USA"]


def test_embedding_stage_respects_identifier_guard():
    embed = FakeEmbed({"WORLD WAR I": [1.0, 0.0], "WORLD WAR II": [1.0, 0.01]})
    ents, rels = frames([entity("WORLD WAR I"), entity("WORLD WAR II")])
    assert canonicalise(ents, rels, embed).aliases == {}


def test_similarity_blocks_give_the_same_pairs(monkeypatch):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 3))
    keys = [f"ENTITY NUMBER {chr(65 + i % 26)}{chr(65 + i // 26)}" for i in range(40)]
    whole_cos = name_pairs.cosine_pairs(vectors, 0.9)
    whole_fuzzy = name_pairs.fuzzy_pairs(keys, 0.9)
    monkeypatch.setattr(name_pairs, "_BLOCK_ELEMENTS", 7)
    assert name_pairs.cosine_pairs(vectors, 0.9) == whole_cos and whole_cos
    assert name_pairs.fuzzy_pairs(keys, 0.9) == whole_fuzzy and whole_fuzzy


def test_merged_entity_fields():
    ents, rels = frames([
        entity("JOE BIDEN", chunks=("c2", "c3", "c5"), kind="other", description="president",
               grounded=False),
        entity("J. BIDEN", chunks=("c1", "c2"), kind="person",
               description="senator; president", grounded=True),
        entity("JOE BIDEN.", chunks=("c9",), kind="organization", description="senator"),
    ])
    result = canonicalise(ents, rels, FakeEmbed())
    assert result.aliases == {"J. BIDEN": "JOE BIDEN", "JOE BIDEN.": "JOE BIDEN"}
    row = result.entities.row(0, named=True)
    assert row == {"name": "JOE BIDEN", "type": "person", "description": "president; senator",
                   "source_chunk_ids": ["c2", "c3", "c5", "c1", "c9"], "grounded": True}
    assert result.entities.schema == pl.Schema(ENTITY_FRAME_SCHEMA)


def test_relationships_renamed_self_loops_dropped_duplicates_merged():
    ents, rels = frames(
        [entity("JOE BIDEN", chunks=("c1", "c2")), entity("J. BIDEN"),
         entity("WASHINGTON"), entity("USA")],
        [rel("J. BIDEN", "WASHINGTON", strength=8.0, weight=8, chunks=("c1",),
             description="lives in"),
         rel("WASHINGTON", "JOE BIDEN", strength=2.0, weight=6, chunks=("c2", "c3", "c4"),
             description="works in"),
         rel("J. BIDEN", "JOE BIDEN", description="same person"),
         rel("USA", "USA", description="loop"),
         rel("USA", "WASHINGTON", strength=9.0, weight=9, description="capital")],
    )
    result = canonicalise(ents, rels, FakeEmbed())
    out = result.relationships.to_dicts()
    assert result.relationships.schema == pl.Schema(RELATIONSHIP_FRAME_SCHEMA)
    assert len(out) == 2
    merged = next(r for r in out if {r["source"], r["target"]} == {"JOE BIDEN", "WASHINGTON"})
    assert (merged["source"], merged["target"]) == ("JOE BIDEN", "WASHINGTON")
    assert merged["description"] == "lives in; works in"
    assert merged["strength"] == pytest.approx((8.0 * 1 + 2.0 * 3) / 4)
    assert merged["weight"] == 14
    assert merged["source_chunk_ids"] == ["c1", "c2", "c3", "c4"]
    untouched = next(r for r in out if r["source"] == "USA")
    assert untouched["target"] == "WASHINGTON" and untouched["weight"] == 9


def test_independent_of_row_order():
    embed = FakeEmbed({"USA": [1.0, 0.0, 0.0, 0.0], "UNITED STATES": [0.99, 0.1, 0.0, 0.0]})
    ents, rels = frames(
        [entity("USA", chunks=("a",)), entity("UNITED STATES", chunks=("b",)),
         entity("U.S.A", chunks=("c",)), entity("J. BIDEN", chunks=("d",)),
         entity("JOE BIDEN", chunks=("e",)), entity("WASHINGTON", chunks=("f",))],
        [rel("USA", "WASHINGTON", description="x", chunks=("a",)),
         rel("WASHINGTON", "UNITED STATES", description="y", chunks=("b",)),
         rel("J. BIDEN", "USA", description="z"), rel("JOE BIDEN", "U.S.A", description="w")],
    )
    first = canonicalise(ents, rels, embed)
    for seed in range(5):
        shuffled = canonicalise(ents.sample(fraction=1.0, shuffle=True, seed=seed),
                                rels.sample(fraction=1.0, shuffle=True, seed=seed), embed)
        assert shuffled.entities.equals(first.entities)
        assert shuffled.relationships.equals(first.relationships)
        assert shuffled.aliases == first.aliases


def test_empty_input_gives_empty_output_without_embedding():
    embed = FakeEmbed()
    result = canonicalise(*frames([]), embed)
    assert result.entities.is_empty() and result.relationships.is_empty()
    assert result.entities.schema == pl.Schema(ENTITY_FRAME_SCHEMA)
    assert result.aliases == {} and result.fuzzy_merges == result.embedding_merges == 0
    assert embed.calls == []


def test_bad_input_is_a_clear_error():
    with pytest.raises(KgragError, match="unique"):
        canonicalise(*frames([entity("A"), entity("A")]), FakeEmbed())
    with pytest.raises(KgragError, match="lacks column"):
        canonicalise(pl.DataFrame({"name": ["A"]}), frames([])[1], FakeEmbed())
    with pytest.raises(KgragError, match="embed returned shape"):
        canonicalise(*frames([entity("ALPHA"), entity("OMEGA")]),
                     lambda names: np.zeros((1, 3)))
    with pytest.raises(KgragError, match="thresholds"):
        canonicalise(*frames([]), FakeEmbed(), fuzzy=1.5)
