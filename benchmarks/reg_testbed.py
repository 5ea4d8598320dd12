"""How hard a KGQA spec's retrieval graphs are: is there room for a trained retriever?

    python benchmarks/reg_testbed.py specs/reg_webqsp.yaml specs/reg_webqsp_hard.yaml

For each spec whose ``kg`` step has run, over the questions its retrieve steps evaluate
(every question no training entry's split trains on), it prints the retrieval graphs'
size (mean, median and max triples), the ceiling (the mean share of a question's gold
triples inside its graph: what recall at any depth can reach) and the untrained cosine
ranking's gold-triple recall at 5 and 100, from the kg artefact's own question and
triple vectors (the ``triple_cosine`` strategy's ranking). A test bed where cosine's
recall@100 sits at the ceiling leaves a trained retriever nothing to gain at depth.
"""

from __future__ import annotations

import argparse

import numpy as np

from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.contents.kg import KgIndex
from kgrag.training.split import held_out

DEPTHS = (5, 100)


def testbed(spec: str) -> dict[str, float]:
    session = api.open_session(spec)
    index = KgIndex(session.artefact("kg"))
    splits = next((s.config["held_out"] for s in session.plan.steps
                   if s.kind == "retrieve" and "held_out" in s.config), [])
    questions = read_questions(session.artefact("corpus"))
    evaluated = set(held_out(questions["question_id"], splits))
    row = {triple_id: i for i, triple_id in enumerate(index.kg.ids)}
    vectors = index.question_vectors()
    sizes, ceiling, recall = [], [], {k: [] for k in DEPTHS}
    for qid, supporting in questions.select("question_id", "supporting_doc_ids").iter_rows():
        if qid not in evaluated:
            continue
        gold = {row[t] for t in supporting}
        graph = index.by_id[qid].triples
        sizes.append(len(graph))
        ceiling.append(len(gold & set(graph.tolist())) / len(gold))
        scores = index.cosines(graph, vectors[qid])
        ranked = graph[np.argsort(-scores, kind="stable")].tolist()
        for k in DEPTHS:
            recall[k].append(len(gold & set(ranked[:k])) / len(gold))
    return {"questions": len(sizes), "triples_mean": float(np.mean(sizes)),
            "triples_median": float(np.median(sizes)), "triples_max": int(max(sizes)),
            "ceiling": float(np.mean(ceiling)),
            **{f"cosine_recall@{k}": float(np.mean(v)) for k, v in recall.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="+", help="KGQA specs whose kg step has run")
    args = parser.parse_args()
    for spec in args.specs:
        found = testbed(spec)
        print(spec)
        for key, value in found.items():
            print(f"  {key:<18} {value:.3f}" if isinstance(value, float)
                  else f"  {key:<18} {value}")


if __name__ == "__main__":
    main()
