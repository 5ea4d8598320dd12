"""Graph shapes and query-to-fact linking of the PPR search, and its one walk per question.

The hand-made graph of ``test_retrieval_ppr`` (five chunks about a film, its director
and two cities), with typed entities and labelled relationships added here.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from kgrag.contents.entities import entity_parts, relationship_parts, write_entity_tables
from kgrag.errors import KgragError
from kgrag.eval.halves import halves
from kgrag.retrieval import ppr_search
from kgrag.retrieval.entity_graph import EntityGraph, named_phrases
from kgrag.retrieval.fact_links import FactLinks, fact_text
from kgrag.retrieval.ppr import PprStrategy
from kgrag.spec.load import load_spec
from tests.conftest import write_spec
from tests.retrieval.test_retrieval_ppr import (
    CHUNK_IDS,
    CONFIG,
    QUESTION_VECTOR,
    TITLES,
    resources,
    search,
    tables,
    write_indexes,
)


def typed(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    return pl.DataFrame({"name": [r[0] for r in rows], "type": [r[1] for r in rows],
                         "description": [r[2] for r in rows]})


def test_named_phrases_keep_names_and_drop_dates_numbers_and_common_nouns():
    entities = typed([
        ("JOHNNY LEE", "person", "Johnny Lee directed it."),
        ("1 MARCH 2013", "date", "It opened on 1 March 2013."),
        ("THE FILM", "concept", "The film was shot in Canberra."),  # capital at the start only
        ("FOX FILM", "concept", "It is a Fox film about a war."),  # holds a proper name
        ("ANGI VERA", "concept", "In 1978 Angi Vera won."),  # a proper noun chunk
        ("$5 MILLION", "other", "It cost $5 million."),
        ("AUSTRALIAN", "other", "An Australian war film."),
    ])
    assert named_phrases(entities) == [True, False, False, True, True, False, True]


def test_a_named_graph_keeps_fewer_phrase_nodes_and_its_titles():
    entities, relationships = tables()
    kinds = {"FORBIDDEN GROUND": "work", "JOHNNY LEE": "person", "CANBERRA": "geo",
             "FILM": "concept", "SYDNEY": "geo", "THE": "concept"}
    entities = entities.with_columns(
        type=pl.Series([kinds[n] for n in entities["name"]]),
        description=pl.Series(["a film by Johnny Lee about Canberra and Sydney"] * 6))
    named = EntityGraph.build([entities], [relationships], CHUNK_IDS, TITLES, phrases="named")
    every = EntityGraph.build([entities], [relationships], CHUNK_IDS, TITLES)
    assert "FILM" in named.names  # a title ("Film") is a phrase whatever the rule says
    assert "THE" in every.names and "THE" not in named.names
    assert len(named.names) < len(every.names)
    untitled = EntityGraph.build([entities], [relationships], CHUNK_IDS, None, phrases="named")
    assert "FILM" not in untitled.names


def test_the_named_phrases_chosen_part_by_part_are_those_of_the_whole_table(
        tmp_path, monkeypatch):
    entities, relationships = tables()
    kinds = ["work", "person", "concept", "concept", "geo", "date"]
    entities = entities.with_columns(type=pl.Series(kinds[:entities.height]),
                                     description=pl.Series(["a film by Johnny Lee"] * 6))
    write_entity_tables(tmp_path, entities, relationships)
    monkeypatch.setattr(ppr_search, "PHRASE_ROWS", 2)
    parts = list(ppr_search._phrases({"name": "ppr", "phrases": "named"}, tmp_path))
    assert len(parts) == 3  # six entities, two at a time
    whole = entities.filter(pl.Series(named_phrases(entities)))
    assert pl.concat(parts).equals(whole.select("name", "source_chunk_ids"))
    every = ppr_search._phrases({"name": "ppr", "phrases": "all"}, tmp_path)
    assert pl.concat(list(every)).equals(entities.select("name", "source_chunk_ids"))


def test_relations_false_drops_the_entity_edges():
    entities, relationships = tables([("JOHNNY LEE", "CANBERRA", 8.0)])
    joined = EntityGraph.build([entities], [relationships], CHUNK_IDS, None)
    alone = EntityGraph.build([entities], [relationships], CHUNK_IDS, None, relations=False)
    lee, canberra = joined.names.index("JOHNNY LEE"), joined.names.index("CANBERRA")
    assert joined.adjacency[lee, canberra] == pytest.approx(0.8)
    assert alone.adjacency[lee, canberra] == 0
    assert alone.adjacency.nnz == joined.adjacency.nnz - 2


def test_a_fact_reads_subject_label_object():
    assert fact_text("FORBIDDEN GROUND", "JOHNNY LEE", "directed by: It was directed by "
                     "Johnny Lee.") == "FORBIDDEN GROUND directed by JOHNNY LEE"
    assert fact_text("A", "B", "A and B met in a bar.") == "A and B"


def axis_embed(texts: list[str]) -> np.ndarray:
    """A stand-in embedder: a fact about Canberra points along x, every other along y."""
    return np.array([[1.0, 0.0] if "CANBERRA" in t else [0.0, 1.0] for t in texts],
                    dtype=np.float32)


def test_fact_links_seed_the_ends_of_the_nearest_facts():
    entities, relationships = tables([("JOHNNY LEE", "CANBERRA", 8.0),
                                      ("FORBIDDEN GROUND", "JOHNNY LEE", 8.0)])
    relationships = relationships.with_columns(
        description=pl.Series(["born in: Lee was born in Canberra.", "directed by: x"]))
    graph = EntityGraph.build([entities], [relationships], CHUNK_IDS, None)
    node = {name: i for i, name in enumerate(graph.names)}
    facts = FactLinks.build(relationships, node.get, axis_embed, top_k=1)
    linked = facts.link(np.array([1.0, 0.0]))  # a question along x: the Canberra fact
    assert linked == {node["JOHNNY LEE"]: 1.0, node["CANBERRA"]: 1.0}
    # a question that names nothing of the graph is linked through the facts, and its
    # seeds say how sure each link is
    linking = search(links=[facts])
    linking.graph = graph
    seeds = linking.seeds("Who was born there?", np.array([1.0, 0.0]))
    assert sorted(seeds.nodes) == sorted(linked) and seeds.certainty == [1.0, 1.0]
    assert search().seeds("Who was born there?").nodes == []


def test_one_walk_per_question_serves_every_budget(tmp_path, monkeypatch):
    folders = write_indexes(tmp_path, *tables())
    ppr_search._LOADED.clear()
    walks = []
    original = ppr_search.Walk.run
    monkeypatch.setattr(ppr_search.Walk, "run",
                        lambda self, *a, **k: walks.append(1) or original(self, *a, **k))
    question = "Where was the director of the film Forbidden Ground born?"
    small = PprStrategy.load({**CONFIG, "budget_tokens": 10}, folders, resources())
    large = PprStrategy.load({**CONFIG, "budget_tokens": 20}, folders, resources())
    assert small.search is large.search
    assert small.retrieve(question, QUESTION_VECTOR).unit_ids == ["c1"]
    assert large.retrieve(question, QUESTION_VECTOR).unit_ids == ["c1", "c2"]
    assert len(walks) == 1
    other = PprStrategy.load({**CONFIG, "damping": 0.6}, folders, resources())
    assert other.search is not small.search
    # a search that walks the same graph otherwise builds no graph of its own
    pushed = PprStrategy.load({**CONFIG, "walk": "push"}, folders, resources())
    assert pushed.search.graph is other.search.graph is small.search.graph
    assert pushed.retrieve(question, QUESTION_VECTOR).unit_ids[0] == "c1"


def test_halves_split_by_seeded_question_id():
    ids = [f"q{i}" for i in range(101)]
    split = halves(ids, seed=0)
    assert split["dev"] | split["test"] == set(ids) and not split["dev"] & split["test"]
    assert len(split["dev"]) == 50  # round(0.5 * 101)
    assert halves(reversed(ids), seed=0) == split  # never file order
    assert halves(ids, seed=1) != split
    with pytest.raises(KgragError, match="too small to split"):
        halves(["q1"])


def test_a_graph_of_relationships_read_part_by_part_is_that_of_the_whole_table(tmp_path):
    """The walk's graph reads the relationship table a part at a time; a pair seen in
    two parts (here in both orientations, and once more) still sums its weights."""
    entities, relationships = tables([("JOHNNY LEE", "CANBERRA", 4.0),
                                      ("FORBIDDEN GROUND", "JOHNNY LEE", 9.0),
                                      ("CANBERRA", "JOHNNY LEE", 2.0), ("SYDNEY", "FILM", 1.0),
                                      ("JOHNNY LEE", "CANBERRA", 3.0)])
    write_entity_tables(tmp_path, entities, relationships)
    parts = relationship_parts(tmp_path, ["source", "target", "strength"], 2)
    read = EntityGraph.build([entities], parts, CHUNK_IDS, TITLES)
    whole = EntityGraph.build([entities], [relationships], CHUNK_IDS, TITLES)
    assert read.names == whole.names and read.adjacency.nnz == whole.adjacency.nnz
    assert (read.adjacency != whole.adjacency).nnz == 0
    lee, canberra = read.names.index("JOHNNY LEE"), read.names.index("CANBERRA")
    assert read.adjacency[lee, canberra] == pytest.approx(0.9)  # (4 + 2 + 3) / 10
    unrelated = EntityGraph.build([entities], relationship_parts(
        tmp_path, ["source", "target", "strength"], 2), CHUNK_IDS, TITLES, relations=False)
    assert unrelated.adjacency[lee, canberra] == 0


def test_a_graph_of_entities_read_part_by_part_is_that_of_the_whole_table(tmp_path):
    """The walk's graph reads the entity table a part at a time: a name met again in a
    later part (another spelling of it) is the same node, its links summed into its
    mentions, and a chunk the dense table lacks is left out in every part."""
    entities, relationships = tables([("JOHNNY LEE", "CANBERRA", 4.0)])
    entities = pl.concat([entities, pl.DataFrame({"name": ["Johnny Lee", "NOWHERE"],
                                                  "source_chunk_ids": [["c4"], ["c9"]]})])
    write_entity_tables(tmp_path, entities, relationships)
    parts = list(entity_parts(tmp_path, ["name", "source_chunk_ids"], 3))
    assert len(parts) == 3
    read = EntityGraph.build(parts, [relationships], CHUNK_IDS, TITLES)
    whole = EntityGraph.build([entities], [relationships], CHUNK_IDS, TITLES)
    assert read.names == whole.names and read.keys == whole.keys
    assert (read.adjacency != whole.adjacency).nnz == 0
    assert list(read.mentions) == list(whole.mentions)
    lee = read.names.index("JOHNNY LEE")
    assert read.mentions[lee] == 3  # c1, c2 and, from the later part, c4
    assert read.mentions[read.names.index("NOWHERE")] == 0


def test_fact_links_on_a_graph_without_relationships_is_refused(tmp_path):
    entities, relationships = tables()
    folders = write_indexes(tmp_path, entities,
                            relationships.with_columns(description=pl.lit("")))
    with pytest.raises(KgragError, match="fact_links"):
        PprStrategy.load({**CONFIG, "fact_links": 5}, folders, resources())


def test_name_links_seed_the_names_nearest_the_question_weighted_by_similarity():
    entities, relationships = tables()
    graph = EntityGraph.build([entities], [relationships], CHUNK_IDS, None)
    vectors = axis_embed(graph.names)  # CANBERRA along x, every other name along y
    names = FactLinks.names(vectors, top_k=1)
    canberra = graph.names.index("CANBERRA")
    assert names.link(np.array([0.8, 0.6])) == {canberra: pytest.approx(0.8)}
    linking = search(links=[names])
    linking.graph = graph
    # a name found in the question keeps certainty 1; the name link adds its similarity
    seeds = linking.seeds("Was Forbidden Ground shot there?", np.array([0.8, 0.6]))
    assert seeds.nodes == [graph.names.index("FORBIDDEN GROUND"), canberra]
    assert seeds.certainty == [1.0, pytest.approx(0.8)]


def test_ppr_defaults_apply_where_a_spec_is_silent_and_off_values_stay_off(project):
    query = [{"name": "new", "strategy": "ppr", "entities": "ents"},
             {"name": "landed", "strategy": "ppr", "entities": "ents", "phrases": "all",
              "dense_seeds": 0},
             {"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
              "skeleton_search": "ppr"}]
    path = write_spec(project, corpus={"dataset": "musique", "path": "../corpus.jsonl"},
                      extraction={"method": "nlp"},
                      graphs=[{"name": "ents", "kind": "entities"},
                              {"name": "skel", "kind": "skeleton"},
                              {"name": "kw", "kind": "bipartite"}],
                      query=query)
    entries = {q["name"]: q for q in load_spec(path).query}
    assert entries["new"]["phrases"] == "named" and entries["new"]["dense_seeds"] == 0.02
    assert "phrases" not in entries["landed"] and entries["landed"]["dense_seeds"] == 0
    # the channels of ket and hugrag keep the walk's own defaults
    assert "phrases" not in entries["ket"] and entries["ket"]["dense_seeds"] == 0
