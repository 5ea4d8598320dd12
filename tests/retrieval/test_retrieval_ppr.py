"""Strategy ``ppr`` on a hand-made entity graph: linking, specificity, the walk, fallback.

Chunks and the entities extracted from them (no relationships unless a test adds some):

    c1 "Forbidden Ground (2013 film)"  FORBIDDEN GROUND, JOHNNY LEE, FILM
    c2 "Johnny Lee"                    JOHNNY LEE, CANBERRA, FILM
    c3 "Canberra"                      CANBERRA, FILM
    c4 "Film"                          FILM
    c5 "Sydney"                        SYDNEY, FILM

A question about where the director of Forbidden Ground was born must reach c2 (one
link from the film's entity) through JOHNNY LEE; c3 is two entity links away.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kgrag.contents.dense import write_matrix
from kgrag.errors import KgragError
from kgrag.models.pipelines import resolve_pipeline
from kgrag.retrieval import STRATEGIES, Resources
from kgrag.retrieval.entity_graph import EntityGraph, title_aliases, words
from kgrag.retrieval.ppr import PprStrategy
from kgrag.retrieval.ppr_search import NO_SEED, ChunkMass, PprSearch
from kgrag.retrieval.seeds import ExtractorMentions, NearestNames, synonym_pairs
from kgrag.retrieval.units import Units
from kgrag.store.vectors import VectorTable

CHUNK_IDS = ["c1", "c2", "c3", "c4", "c5"]
TITLES = {"c1": "Forbidden Ground (2013 film)", "c2": "Johnny Lee", "c3": "Canberra",
          "c4": "Film", "c5": "Sydney"}
ENTITIES = {"FORBIDDEN GROUND": ["c1"], "JOHNNY LEE": ["c1", "c2"], "CANBERRA": ["c2", "c3"],
            "FILM": ["c1", "c2", "c3", "c4", "c5"], "SYDNEY": ["c5"], "THE": ["c4"]}
DENSE = [0.1, 0.2, 0.3, 0.4, 0.9]  # cosine of each chunk to the question: c5 is nearest
QUESTION = "Where was the director of the film Forbidden Ground born?"


def tables(relationships: list[tuple[str, str, float]] = ()) -> tuple[pl.DataFrame, pl.DataFrame]:
    entities = pl.DataFrame({"name": list(ENTITIES),
                             "source_chunk_ids": list(ENTITIES.values())})
    rels = pl.DataFrame({"source": [r[0] for r in relationships],
                         "target": [r[1] for r in relationships],
                         "strength": [r[2] for r in relationships]},
                        schema={"source": pl.String, "target": pl.String, "strength": pl.Float64})
    return entities, rels


def graph(titles: bool = True, relationships=()) -> EntityGraph:
    entities, rels = tables(relationships)
    return EntityGraph.build([entities], [rels], CHUNK_IDS, TITLES if titles else None)


def search(dense_seeds: float = 0.0, relationships=(), damping=0.5, dense_seed_chunks: int = 10,
           **seeding) -> PprSearch:
    sims = np.array(DENSE)
    matrix = np.stack([sims, np.sqrt(1 - sims**2)], axis=1).astype(np.float32)
    return PprSearch(graph(relationships=relationships), matrix, damping=damping,
                     max_iterations=50, dense_seeds=dense_seeds,
                     dense_seed_chunks=dense_seed_chunks, **seeding)


def strategy(budget: int = 20, **kwargs) -> PprStrategy:
    units = Units({c: TITLES[c] for c in CHUNK_IDS}, dict.fromkeys(CHUNK_IDS, 10),
                  {c: f"d{c}" for c in CHUNK_IDS})
    return PprStrategy(search(**kwargs), units, budget)


QUESTION_VECTOR = np.array([1.0, 0.0])


def names(g: EntityGraph, nodes: list[int]) -> list[str]:
    return [g.names[n] for n in nodes]


def test_words_ignore_case_and_punctuation():
    assert words("J.R.R. Tolkien's") == ("j", "r", "r", "tolkien", "s")
    assert title_aliases("Forbidden Ground (2013 film)") == ["Forbidden Ground (2013 film)",
                                                              "Forbidden Ground"]
    assert title_aliases("Canberra") == ["Canberra"]


def test_linking_finds_named_entities_longest_match_first_and_skips_stop_words():
    g = graph()
    # "the" is an entity but only stop words; "film" is matched too (a hub, weighted down)
    assert names(g, g.link(QUESTION)) == ["FILM", "FORBIDDEN GROUND"]
    assert names(g, g.link("Is Johnny Lee from Canberra?")) == ["JOHNNY LEE", "CANBERRA"]
    assert g.link("Who painted it?") == []


def test_titles_are_entities_merged_by_name_and_linked_without_their_parenthesis():
    with_titles, without = graph(True), graph(False)
    assert "FORBIDDEN GROUND (2013 FILM)" in with_titles.names
    assert len(with_titles.names) == len(without.names) + 1  # the other titles merged
    # "Forbidden Ground" links to the extracted entity (first of equal keys), which the
    # title node shares its alias with; the chunks it names do not change
    assert names(with_titles, with_titles.link("Forbidden Ground (2013 film)")) == [
        "FORBIDDEN GROUND (2013 FILM)"]


def test_specificity_is_the_inverse_of_the_chunks_mentioning_an_entity():
    g = graph(titles=False)
    nodes = [g.names.index(n) for n in ("FORBIDDEN GROUND", "JOHNNY LEE", "FILM")]
    assert g.specificity(nodes) == pytest.approx([1.0, 0.5, 0.2])


def test_mass_reaches_the_chunk_two_links_from_the_seed():
    ranked, scores, trace = search().scored(QUESTION, QUESTION_VECTOR)
    assert ranked[:2] == ["c1", "c2"]  # the film's chunk, then its director's
    assert scores["c2"] > scores["c3"] > 0
    assert trace["seeds"] == {"FILM": pytest.approx(0.2), "FORBIDDEN GROUND": 1.0}
    assert "fallback" not in trace


def test_relationships_carry_mass_between_entities():
    plain = search().scored("Is Johnny Lee famous?", QUESTION_VECTOR)[1]
    linked = search(relationships=[("JOHNNY LEE", "SYDNEY", 10.0)]).scored(
        "Is Johnny Lee famous?", QUESTION_VECTOR)[1]
    assert linked["c5"] > plain["c5"]


def test_dense_seeds_lift_the_chunks_nearest_the_question():
    without = search().scored(QUESTION, QUESTION_VECTOR)[1]
    with_dense = search(dense_seeds=0.5).scored(QUESTION, QUESTION_VECTOR)[1]
    assert with_dense["c5"] > without["c5"]
    assert sum(with_dense.values()) <= 1.0
    # only the nearest chunk seeded: c4, second nearest, gets less than when seeded too
    nearest = search(dense_seeds=0.5, dense_seed_chunks=1).scored(QUESTION, QUESTION_VECTOR)[1]
    assert nearest["c5"] > with_dense["c5"] and nearest["c4"] < with_dense["c4"]


def test_seeds_near_drops_the_seeds_whose_chunks_are_all_far_from_the_question():
    """A name the question shares only with passages far from it (among many distractors,
    a distractor's name) seeds no walk. With seeds_near 1, FILM (c1 to c5, c5 the
    nearest chunk) seeds and FORBIDDEN GROUND (c1 alone, the farthest) does not; 0 keeps
    every seed; a question none of whose seeds is near keeps them all."""
    def seeds(question: str, near: int) -> set[str]:
        trace = search(seeds_near=near).scored(question, QUESTION_VECTOR)[2]
        assert "fallback" not in trace
        return set(trace["seeds"])

    assert seeds(QUESTION, 1) == {"FILM"}
    trace = search(seeds_near=1).scored(QUESTION, QUESTION_VECTOR)[2]
    assert trace["far_seeds"] == ["FORBIDDEN GROUND"]  # the trace says what was left out
    assert seeds(QUESTION, 5) == seeds(QUESTION, 0) == {"FILM", "FORBIDDEN GROUND"}
    assert seeds("Is Johnny Lee famous?", 1) == {"JOHNNY LEE"}  # c1, c2: none near


def test_the_context_records_seeds_and_scores_and_fits_the_budget():
    context = strategy(budget=20).retrieve(QUESTION, QUESTION_VECTOR)
    assert context.unit_ids == ["c1", "c2"] and context.tokens == 20
    assert set(context.trace["scores"]) == {"c1", "c2"}
    assert context.trace["scores"]["c1"] > context.trace["scores"]["c2"] > 0



def test_the_trace_holds_the_entities_reached_and_the_edges_walked():
    """The report draws a question's subgraph from these: the entities beyond the seeds
    that the walk left mass on, and the mention and relationship edges among them and the
    chunks returned."""
    context = strategy(budget=20, relationships=[("JOHNNY LEE", "CANBERRA", 5.0)]).retrieve(
        QUESTION, QUESTION_VECTOR)
    reached = context.trace["reached"]
    assert {"JOHNNY LEE", "FORBIDDEN GROUND (2013 FILM)"} <= set(reached)
    assert not set(reached) & set(context.trace["seeds"]) and len(reached) <= 10
    assert list(reached.values()) == sorted(reached.values(), reverse=True)
    edges = context.trace["subgraph"]
    assert ["FORBIDDEN GROUND", "c1"] in edges["mentions"]
    assert ["JOHNNY LEE", "c2"] in edges["mentions"] and ["FILM", "c2"] in edges["mentions"]
    assert all(chunk in context.unit_ids for _, chunk in edges["mentions"])
    assert ["SYDNEY", "c1"] not in edges["mentions"]  # no such mention in the graph
    assert edges["relations"] == [["JOHNNY LEE", "CANBERRA"]]
    fallback = strategy(budget=20).retrieve("Who painted it?", QUESTION_VECTOR)
    assert "subgraph" not in fallback.trace and "reached" not in fallback.trace

def test_a_question_naming_no_entity_falls_back_to_dense_and_says_so():
    context = strategy(budget=20).retrieve("Who painted it?", QUESTION_VECTOR)
    assert context.unit_ids == ["c5", "c4"]  # dense order
    assert context.trace["fallback"] == NO_SEED and context.trace["seeds"] == {}


def write_indexes(root: Path, entities: pl.DataFrame, relationships: pl.DataFrame
                  ) -> dict[str, Path]:
    folders = {role: root / role for role in ("graph", "dense", "chunks")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    entities.write_parquet(folders["graph"] / "entities.parquet")
    relationships.write_parquet(folders["graph"] / "relationships.parquet")
    sims = np.array(DENSE)
    write_matrix(folders["dense"], VectorTable.create(
        folders["dense"], "chunks", CHUNK_IDS, np.stack([sims, np.sqrt(1 - sims**2)], axis=1)))
    pl.DataFrame({"chunk_id": CHUNK_IDS, "title": [TITLES[c] for c in CHUNK_IDS]}
                 ).write_parquet(folders["chunks"] / "chunks.parquet")
    return folders


CONFIG = {"name": "ppr", "strategy": "ppr", "skeleton": "skel", "hierarchy": None,
          "entities": None,
          "budget_tokens": 20, "damping": 0.5, "max_iterations": 50, "dense_seeds": 0.0,
          "dense_seed_chunks": 10, "titles": True, "specific_steps": True}


def resources() -> Resources:
    return Resources(Units({c: TITLES[c] for c in CHUNK_IDS}, dict.fromkeys(CHUNK_IDS, 10),
                           {c: f"d{c}" for c in CHUNK_IDS}), tokenizer=None)


def test_load_reads_a_build_folder(tmp_path: Path):
    folders = write_indexes(tmp_path, *tables())
    # a skeleton is read at its extraction (no need of its vectors), a hierarchy at its
    # canonical entities
    assert STRATEGIES["ppr"].inputs(CONFIG) == {"graph": "extract.skel", "dense": "dense",
                                         "chunks": "chunks"}
    assert STRATEGIES["ppr"].inputs({**CONFIG, "skeleton": None, "hierarchy": "h"})["graph"] == \
        "hierarchy.h"
    assert STRATEGIES["ppr"].inputs({**CONFIG, "skeleton": None, "entities": "e"})["graph"] == \
        "extract.e"
    loaded = PprStrategy.load(CONFIG, folders, resources())
    assert loaded.retrieve(QUESTION, QUESTION_VECTOR).unit_ids == ["c1", "c2"]


def test_a_graph_without_entities_or_a_bad_damping_is_refused(tmp_path: Path):
    entities, relationships = tables()
    folders = write_indexes(tmp_path, entities.clear(), relationships)
    with pytest.raises(KgragError, match="no entities"):
        PprStrategy.load(CONFIG, folders, resources())
    with pytest.raises(KgragError, match="damping"):
        PprStrategy.load({**CONFIG, "damping": 1.0}, folders, resources())
    with pytest.raises(KgragError, match="exactly one"):
        STRATEGIES["ppr"].inputs({**CONFIG, "hierarchy": "h"})


def test_specific_steps_weight_mention_edges_by_the_entity_specificity():
    entities, rels = tables()
    specific = EntityGraph.build([entities], [rels], CHUNK_IDS, None, specific_steps=True)
    plain = EntityGraph.build([entities], [rels], CHUNK_IDS, None, specific_steps=False)
    film, lee = specific.names.index("FILM"), specific.names.index("JOHNNY LEE")
    c1 = len(specific.names) + CHUNK_IDS.index("c1")
    assert specific.adjacency[c1, film] == pytest.approx(0.2)  # FILM: five chunks
    assert specific.adjacency[c1, lee] == pytest.approx(0.5)
    assert specific.adjacency[film, c1] == specific.adjacency[c1, film]  # symmetric
    assert plain.adjacency[c1, film] == plain.adjacency[c1, lee] == 1.0


def test_extractor_mentions_are_the_chunk_rules_run_on_the_question():
    mentions = ExtractorMentions(resolve_pipeline("en_core_web_sm"))
    # the determiner trimmed and the name upper-cased, as in the chunks' extraction
    assert "FORBIDDEN GROUND" in mentions("Where was the director of the film Forbidden "
                                          "Ground born?")


def test_question_mentions_add_seeds_that_name_matching_missed():
    # the finder's mentions are matched to names by words; one no name matches is dropped
    plain = search().seeds("What is the harbour city like?")
    found = search(mentions=lambda q: ["HARBOUR CITY", "SYDNEY"]).seeds(
        "What is the harbour city like?")
    assert plain.nodes == [] and names(graph(), found.nodes) == ["SYDNEY"]
    assert found.nearest == {}


class FakeEmbedder:
    """Names and mentions as one-hot vectors over a small vocabulary of names."""

    AXES = ("CANBERRA", "SYDNEY", "JOHNNY LEE", "THE MOON")

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), len(self.AXES) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            axis = {"HARBOUR CITY": "SYDNEY"}.get(text, text)  # a synonym of Sydney
            rows[i, self.AXES.index(axis) if axis in self.AXES else -1] = 1.0
        return rows


def test_an_unmatched_mention_links_to_the_nearest_name_above_the_threshold():
    g = graph()
    vectors = FakeEmbedder().encode(g.names)
    nearest = NearestNames(vectors, FakeEmbedder().encode, threshold=0.9)
    assert nearest.link(["HARBOUR CITY", "THE MOON"]) == {"HARBOUR CITY": g.names.index("SYDNEY")}
    seeds = search(mentions=lambda q: ["HARBOUR CITY"], nearest=nearest).seeds("harbour city?")
    assert names(g, seeds.nodes) == ["SYDNEY"] and seeds.nearest == {"HARBOUR CITY": "SYDNEY"}
    trace = search(mentions=lambda q: ["HARBOUR CITY"], nearest=nearest).scored(
        "harbour city?", QUESTION_VECTOR)[2]
    assert trace["nearest"] == {"HARBOUR CITY": "SYDNEY"} and "fallback" not in trace


def test_synonym_edges_join_names_that_embed_close_and_carry_mass():
    vectors = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]], dtype=np.float32)
    assert synonym_pairs(vectors, 0.9) == [(0, 1, pytest.approx(0.96))]
    g = graph()
    lee, sydney = g.names.index("JOHNNY LEE"), g.names.index("SYDNEY")
    joined = g.with_synonyms([(lee, sydney, 0.95)])
    assert joined.adjacency[lee, sydney] == joined.adjacency[sydney, lee] == pytest.approx(0.95)
    assert g.adjacency[lee, sydney] == 0 and g.with_synonyms([]) is g
    walk = PprSearch(joined, search().chunk_matrix, damping=0.5, max_iterations=50,
                     dense_seeds=0.0)
    assert walk.scored("Is Johnny Lee famous?", QUESTION_VECTOR)[1]["c5"] > \
        search().scored("Is Johnny Lee famous?", QUESTION_VECTOR)[1]["c5"]


def test_load_embeds_names_only_for_the_options_that_need_them(tmp_path: Path):
    folders = write_indexes(tmp_path, *tables())

    class Counting(FakeEmbedder):
        calls = 0

        def encode(self, texts):
            Counting.calls += 1
            return super().encode(texts)

    embedded = Resources(resources().units, tokenizer=None, embedder=Counting())
    PprStrategy.load(CONFIG, folders, embedded)
    assert Counting.calls == 0
    plain = PprStrategy.load(CONFIG, folders, embedded).search.graph.adjacency.nnz
    loaded = PprStrategy.load({**CONFIG, "synonyms": 0.9}, folders, embedded)
    # the names outside the fake vocabulary share one axis: synonyms of one another
    assert Counting.calls == 1 and loaded.search.nearest is None
    assert loaded.search.graph.adjacency.nnz > plain


def test_chunk_masses_are_read_where_asked_and_match_the_walk():
    """Was: a dict of every chunk the walk reached, built per question (at a million
    chunks it cost more than the walk). The mapping holds the same masses, in ranking
    order, and no entry for a chunk the walk did not reach (c6: no entity, no title)."""
    chunk_ids = [*CHUNK_IDS, "c6"]
    sims = np.array([*DENSE, 0.5])
    matrix = np.stack([sims, np.sqrt(1 - sims**2)], axis=1).astype(np.float32)
    entities, rels = tables()
    walk = PprSearch(EntityGraph.build([entities], [rels], chunk_ids, TITLES), matrix, damping=0.5,
                     max_iterations=50, dense_seeds=0.0)
    ranked, scores, _ = walk.scored(QUESTION, QUESTION_VECTOR)
    mass, _, _ = walk.run(QUESTION, QUESTION_VECTOR)
    chunk_mass = dict(zip(chunk_ids, mass[len(walk.graph.names):]))
    expected = {c: float(chunk_mass[c]) for c in ranked if chunk_mass[c] > 0}
    assert type(scores) is ChunkMass and len(scores) == len(expected) == 5
    assert list(scores.items()) == list(expected.items())
    assert scores.get("c6", 0.0) == 0.0 and "c6" not in scores and ranked[-1] == "c6"
