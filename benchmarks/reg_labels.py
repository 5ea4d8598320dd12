"""How good are a KGQA spec's training labels? Each label set against the gold triples.

    python benchmarks/reg_labels.py specs/reg_webqsp_hard.yaml

For a spec whose ``supervise`` (and, for refined labels, ``refine``) steps have run, it
prints for the weak labels (the triples on the shortest topic-answer paths) and for every
refine step's labels (the triples of the candidate paths the LLM selected) over the
supervised training questions that have gold triples: the questions, positives per
question, and the mean per-question precision and recall of the positives against the
question's gold triples. The ``labels: gold`` oracle is precision and recall 1 by
definition; a trained row's gap to it follows the labels' gap.
"""

from __future__ import annotations

import argparse
from statistics import mean

from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.contents.kg import KgIndex
from kgrag.contents.training import read_refined, read_supervision


def label_quality(labels: dict[str, list[int]], gold: dict[str, set[int]]) -> dict[str, float]:
    """Questions, positives per question, mean precision and recall against ``gold``, over
    the questions with both positives and gold triples."""
    rows = [(set(positives), gold[qid]) for qid, positives in labels.items()
            if positives and gold.get(qid)]
    return {"questions": len(rows),
            "positives": round(mean(len(p) for p, _ in rows), 2),
            "precision": round(mean(len(p & g) / len(p) for p, g in rows), 3),
            "recall": round(mean(len(p & g) / len(g) for p, g in rows), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    args = parser.parse_args()
    session = api.open_session(args.spec)
    index = KgIndex(session.artefact("kg"))
    row = {triple_id: i for i, triple_id in enumerate(index.kg.ids)}
    questions = read_questions(session.artefact("corpus"))
    gold = {qid: {row[t] for t in supporting if t in row} for qid, supporting
            in questions.select("question_id", "supporting_doc_ids").iter_rows()}
    for step in session.plan.steps:
        if step.kind == "reg_supervise":
            table, _ = read_supervision(session.artefact(step.name))
            labels = dict(table.select("question_id", "weak").iter_rows())
            print(f"weak ({step.name}): {label_quality(labels, gold)}")
        elif step.kind == "reg_refine":
            table = read_refined(session.artefact(step.name))
            labels = dict(table.select("question_id", "positives").iter_rows())
            print(f"refined ({step.name}): {label_quality(labels, gold)}")


if __name__ == "__main__":
    main()
