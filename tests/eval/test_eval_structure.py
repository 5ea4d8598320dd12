"""HugRAG's App. E structural metrics, checked by hand."""

from __future__ import annotations

from kgrag.eval.structure import gold_nodes, structural_metrics


def test_gold_nodes_are_whole_word_name_matches() -> None:
    names = ["APASE", "OIL PALM", "PALM", "PHOSPHORUS LIMITATION", "KINASE X"]
    sentences = ["APase activity rose in oil palm under phosphorus limitation.",
                 "Palmitate was not measured."]
    assert gold_nodes(names, sentences) == {"APASE", "OIL PALM", "PALM",
                                            "PHOSPHORUS LIMITATION"}
    assert gold_nodes(names, []) == set()


def test_structural_metrics_with_and_without_gates() -> None:
    traces = [
        # gold A reached at hop 2 with gates, at hop 3 without
        {"reached": {"A": 2, "X": 0}, "reached_without_gates": {"A": 3, "X": 0}},
        # gold B and C: only B reached with gates (hop 1), nothing without
        {"reached": {"B": 1}, "reached_without_gates": {"Y": 0}},
        # no gold nodes: left out
        {"reached": {"Z": 0}, "reached_without_gates": {"Z": 0}},
    ]
    golds = [{"A"}, {"B", "C"}, set()]
    m = structural_metrics(traces, golds)
    assert m["structural_questions"] == 2
    assert m["reachability"] == 1.0 and m["reachability_no_gates"] == 0.5
    assert m["gold_coverage"] == round((1 + 0.5) / 2, 4)
    assert m["gold_coverage_no_gates"] == 0.5
    # min hops only over questions reachable both ways: the first one
    assert m["min_hops"] == 2 and m["min_hops_no_gates"] == 3


def test_structural_metrics_without_a_gate_free_trace() -> None:
    m = structural_metrics([{"reached": {"A": 1}}], [{"A", "B"}])
    assert m == {"structural_questions": 1, "reachability": 1.0, "gold_coverage": 0.5,
                 "min_hops": 1.0}
    assert structural_metrics([{}], [{"A"}]) == {"structural_questions": 0}
