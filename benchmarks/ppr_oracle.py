"""Oracle rows for graph search: is the linking short, or the graph and its walk?

    python benchmarks/ppr_oracle.py specs/graph_search/hotpotqa_notitles.yaml ppr [...]

A ppr row has two parts. Linking (names found in the question, by spaCy's rules, and
MiniLM where links by embedding are on) decides where the walk starts; the graph and
the walk decide where its mass goes. Each is replaced by gold in turn, on the dev and
test halves (``kgrag.eval.halves``) of a spec whose retrieve steps have run:

* ``gold seeded``: the share of questions with a seed in a supporting passage (a
  seed node linked to one of its chunks). Where this is low, linking is short.
* ``oracle walk hit@5``: the walk restarted at the chunks of every supporting passage
  but one, uniformly; the share of held-out passages among the five passages of most
  mass that were not seeds (every supporting passage held out in turn). This is the
  walk with gold linking for all hops but one: where it is low, the graph does not
  join a question's passages and no linking can fix that.
* ``R@5``: the real row, for comparison.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import polars as pl

from kgrag import api
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.eval.halves import HALVES, halves
from kgrag.eval.metrics import recall_at_k
from kgrag.steps.retrieve import load_strategy

K = 5


def oracle(spec: str, entry: str, seed: int) -> dict[str, float]:
    session = api.open_session(spec)
    step = next(s for s in session.plan.steps if s.kind == "retrieve"
                and s.name.split(".", 1)[1].split("@")[0] == entry)
    inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
    search = load_strategy(step.config, inputs, session.models).search
    graph = search.graph
    n_entities = len(graph.names)
    doc_of = dict(read_chunks(session.artefact("chunks"), ["chunk_id", "doc_id"]).iter_rows())
    chunk_docs = [doc_of[c] for c in graph.chunk_ids]
    chunks_of: dict[str, list[int]] = {}
    for j, doc in enumerate(chunk_docs):
        chunks_of.setdefault(doc, []).append(n_entities + j)
    questions = read_questions(session.artefact("corpus")).filter(
        pl.col("supporting_doc_ids").list.len() > 0)
    split = halves(questions["question_id"], seed)
    texts = questions["question"].to_list()
    vectors = session.models.embedder_of(step.config["embedder"]).encode(texts)
    adjacency = graph.adjacency
    per_question: dict[str, tuple[float, float | None, float]] = {}
    for qid, text, vector, gold in zip(questions["question_id"], texts, vectors,
                                       questions["supporting_doc_ids"]):
        gold = [d for d in gold if d in chunks_of]
        seeds = search.seeds(text, vector).nodes
        touched = {chunk_docs[c - n_entities] for s in seeds
                   for c in adjacency[s].indices if c >= n_entities}
        hits = []
        for held in gold if len(gold) > 1 else []:
            restart = np.zeros(adjacency.shape[0])
            seeded = [c for d in gold if d != held for c in chunks_of[d]]
            restart[seeded] = 1.0
            mass = search.walk.run(restart, search.damping, max_steps=search.max_iterations)
            order = np.argsort(-mass[n_entities:], kind="stable")
            ranked = [chunk_docs[j] for j in order if chunk_docs[j] not in set(gold) - {held}]
            hits.append(held in list(dict.fromkeys(ranked))[:K])
        ranked_real = search.scored(text, vector)[0]
        real = recall_at_k([doc_of[c] for c in ranked_real], gold, K)
        per_question[qid] = (float(bool(touched & set(gold))),
                             float(np.mean(hits)) if hits else None, real or 0.0)
    row = {}
    for half in HALVES:
        values = [per_question[q] for q in split[half] if q in per_question]
        walked = [v[1] for v in values if v[1] is not None]
        row |= {f"gold seeded {half}": float(np.mean([v[0] for v in values])),
                f"oracle walk hit@5 {half}": float(np.mean(walked)),
                f"R@5 {half}": float(np.mean([v[2] for v in values]))}
    return row


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("entries", nargs="+", help="ppr entries of the spec")
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split")
    args = parser.parse_args(argv)
    columns = [f"{m} {h}" for m in ("gold seeded", "oracle walk hit@5", "R@5") for h in HALVES]
    print(f"\n{args.spec}\n\n| row | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for entry in args.entries:
        row = oracle(args.spec, entry, args.seed)
        print(f"| {entry} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
