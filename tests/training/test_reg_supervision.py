"""ReG's weak labels, candidate pool, path merging and refinement prompt on a toy graph."""

from __future__ import annotations

import pytest

from kgrag.kg.graph import KnowledgeGraph, with_distractors
from kgrag.training import refinement
from kgrag.training.supervision import path_text, supervise

TRIPLES = [
    ("Lou Seal", "mascot.team", "Giants"),            # 0
    ("Giants", "team.championships", "2010 Series"),  # 1
    ("Giants", "team.championships", "2012 Series"),  # 2
    ("Giants", "team.arena", "AT&T Park"),            # 3
    ("2014 Series", "event.champion", "Giants"),      # 4: reached backward from an answer
    ("Lou Seal", "common.topic.notable_types", "Mascot"),  # 5
    ("Elsewhere", "r", "Nowhere"),                    # 6: another component
]


@pytest.fixture
def kg() -> KnowledgeGraph:
    return KnowledgeGraph([f"t{i}" for i in range(len(TRIPLES))],
                          *zip(*TRIPLES))


def test_neighbourhood_grows_hop_by_hop_in_either_direction(kg: KnowledgeGraph):
    seal = [kg.entity_index["Lou Seal"]]
    assert kg.neighbourhood(seal, 1).tolist() == [0, 5]
    assert kg.neighbourhood(seal, 2).tolist() == [0, 1, 2, 3, 4, 5]
    assert kg.layers(seal, 3) == [[0, 5], [1, 2, 3, 4], []]  # each hop's new triples


def test_distractors_pad_a_graph_from_the_given_graphs_in_order(kg: KnowledgeGraph):
    seal = kg.layers([kg.entity_index["Lou Seal"]], 2)
    nearest_first = [i for layer in seal for i in layer]  # [0, 5, 1, 2, 3, 4]
    elsewhere = [6]
    # the first graph given is taken before the second, nearest its topic first, and cut
    assert with_distractors([6], [nearest_first, elsewhere], 3).tolist() == [0, 5, 6]
    assert with_distractors([], [elsewhere, nearest_first], 3).tolist() == [0, 5, 6]
    # triples the graph holds already are not counted twice; too few: all of them
    assert with_distractors([0, 6], [nearest_first], 4).tolist() == [0, 1, 5, 6]
    assert with_distractors([6], [elsewhere], 5).tolist() == [6]
    # a graph already that large is kept as it is
    assert with_distractors([1, 2, 3], [elsewhere], 2).tolist() == [1, 2, 3]


def test_weak_labels_are_the_shortest_paths_in_both_directions(kg: KnowledgeGraph):
    graph = kg.neighbourhood([kg.entity_index["Lou Seal"]], 2)
    topic = [kg.entity_index["Lou Seal"]]
    forward = supervise(kg, graph, topic, ["2010 Series"])
    assert forward.weak == {0, 1}
    # "2014 Series" reaches the topic only backward: 2014 Series → Giants ← Lou Seal is no
    # directed path, so it has no weak label
    assert supervise(kg, graph, topic, ["2014 Series"]).weak == frozenset()
    giants = [kg.entity_index["Giants"]]
    assert supervise(kg, graph, giants, ["2014 Series"]).weak == {4}  # answer → topic


def test_no_path_gives_no_label_and_no_pool(kg: KnowledgeGraph):
    graph = kg.neighbourhood([kg.entity_index["Lou Seal"]], 2)
    result = supervise(kg, graph, [kg.entity_index["Lou Seal"]], ["Nowhere", "Unknown"])
    assert result.weak == frozenset() and result.candidates == () and result.answer is None


def test_pool_keeps_one_answer_and_merges_relation_chains(kg: KnowledgeGraph):
    graph = kg.neighbourhood([kg.entity_index["Lou Seal"]], 2)
    result = supervise(kg, graph, [kg.entity_index["Lou Seal"]], ["2010 Series", "2012 Series"])
    assert result.weak == {0, 1, 2}
    assert kg.entities[result.answer] == "2010 Series"  # tie: first in gold order
    shown = [(c.source, path_text(kg, c.path), sorted(c.members)) for c in result.candidates]
    assert shown == [
        ("sp", "Lou Seal → [mascot.team] → Giants → [team.championships] → 2010 Series",
         [0, 1]),
        ("q", "Lou Seal → [mascot.team] → Giants", [0]),
        ("q", "Lou Seal → [common.topic.notable_types] → Mascot", [5]),
        # the answer's neighbourhood: its one triple, whose chain merges nothing else
        ("a", "Giants → [team.championships] → 2010 Series", [1]),
    ]
    # before merging: both answers' paths and every one-hop triple as its own path
    assert result.pool_before == 2 + 2 + 2


def test_refinement_prompt_grammar_and_parse():
    text = refinement.prompt("who?", ["A", "B"], ["x → [r] → A", "y → [s] → B"])
    assert "Path 0. x → [r] → A\nPath 1. y → [s] → B" in text
    assert text.endswith("Question: who?\nAnswer(s): A; B\n")
    assert '"0" | "1"' in refinement.grammar(2) and "line{1,2}" in refinement.grammar(2)
    assert refinement.selected("ans: Path 1\nans: Path 0\nans: Path 1\n", 2) == [1, 0]
    assert refinement.selected("ans: Path 7\n", 2) == []  # not a number shown
    assert refinement.selected("Path 0 looks right", 2) == []
