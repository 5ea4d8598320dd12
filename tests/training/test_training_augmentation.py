"""ARK's KG augmentation: similarity edges, seeds from question and answer, the PPR cut
at the largest log gap inside a window, and the generation's validation."""

import json

import numpy as np
import pytest

from kgrag.training import augmentation as aug


def _graph(names, edges, vectors=None, threshold=0.8):
    vectors = np.eye(len(names), dtype=np.float32) if vectors is None else vectors
    return aug.question_graph(names, ["thing"] * len(names), [f"{n} is a thing" for n in names],
                              edges, vectors, threshold)


def test_similar_entities_are_joined_and_relationships_kept():
    vectors = np.array([[1, 0], [0.9, 0.436], [0, 1]], dtype=np.float32)
    graph = _graph(["A", "B", "C"], [("B", "C", 2.0), ("C", "Z", 1.0)], vectors)
    assert graph.similarity_edges == 1  # A–B only
    dense = graph.adjacency.toarray()
    assert dense[0, 1] == dense[1, 0] == 1.0 and dense[1, 2] == dense[2, 1] == 2.0
    assert dense[0, 2] == 0  # an unknown endpoint (Z) adds nothing


def test_seeds_are_the_entities_the_question_or_answer_names():
    graph = _graph(["PORT BLAIR", "BAY", "LONDON"], [])
    assert aug.seeds(graph, "Where is the bay?", "Port Blair") == [0, 1]
    assert aug.seeds(graph, "Who?", "nobody") == []


def test_the_cut_falls_at_the_largest_log_gap_inside_the_window():
    items = [(0, 0.4), (1, 0.3), (2, 0.2), (3, 0.01), (4, 0.009), (5, 0.008)]
    assert aug.cut(items, 2, 5) == [0, 1, 2]  # 0.2 → 0.01 is the big drop
    assert aug.cut(items, 4, 5) == [0, 1, 2, 3, 4]  # the window forbids cutting there
    assert aug.cut(items[:2], 3, 10) == [0, 1]  # fewer than the window: all


def test_ppr_ranks_the_seeds_neighbourhood_first_and_drops_scores_below_epsilon():
    graph = _graph(list("ABCDE"), [("A", "B", 1.0), ("B", "C", 1.0), ("D", "E", 1.0)])
    ranked = aug.ranked(graph, [0], 0.85, 1e-4)
    nodes = [i for i, _ in ranked]
    assert set(nodes) == {0, 1, 2}  # D and E are unreachable
    assert nodes.index(0) < nodes.index(2)  # the seed before the far end of its path
    assert all(score >= 1e-4 for _, score in ranked)


def test_the_prompt_carries_the_papers_json_input():
    graph = _graph(["PORT BLAIR", "BAY"], [("PORT BLAIR", "BAY", 1.0)])
    text = aug.prompt(graph, [1, 0], "Where?", "Port Blair", 10)
    payload = json.loads(text[text.index("{"):text.index("\n\nReply")])
    assert payload["original_question"] == "Where?" and payload["answer"] == "Port Blair"
    assert [e["name"] for e in payload["entities"]] == ["BAY", "PORT BLAIR"]
    assert aug.schema(10)["properties"]["confusing_questions"]["maxItems"] == 10


def test_validation_keeps_new_questions_and_rejects_a_useless_generation():
    check = aug.validated("Where is it?")
    kept = check({"confusing_questions": ["Where is it?", "Which port is it?",
                                          "Which port is it?", "no question mark"]})
    assert kept == ["Which port is it?"]
    with pytest.raises(ValueError):
        check({"confusing_questions": ["where is it?"]})
