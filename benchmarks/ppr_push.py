"""The push walk against the power walk: how much does ``walk: push`` change a ranking?

    PYTHONPATH=. python benchmarks/ppr_push.py specs/reader/musique.yaml ppr \\
        [--epsilons 1e-4 1e-5 1e-6] [--half dev]

Loads the named ``ppr`` entry of a spec whose extraction has run (its graph, dense
index and chunks; ``sparse_scale.built``: the newest build where the code moved on), and ranks every question of one half (``kgrag.eval.halves``; choose
ε on dev) with the power walk and with the push walk at each ε, on the same search (same
graph, seeds, restart weights and damping). Per walk it prints R@5 (supporting passages
among the first five passages), overlap@5 with the power walk's first five chunks, the
mean L1 distance of the chunk-and-entity mass from the power walk's, and the mean
milliseconds of a question's whole search (a shared machine: upper bounds).
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import polars as pl

from benchmarks.sparse_scale import built
from kgrag import api
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.eval.halves import halves
from kgrag.eval.metrics import recall_at_k
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.walked import WalkMemo
from kgrag.steps.retrieve import load_strategy

K = 5


def walked(search: PprSearch, texts: list[str], vectors: np.ndarray
           ) -> tuple[list[list[str]], list[np.ndarray | None], float]:
    """Each question's chunk ranking and node mass (None: the dense fallback), and the
    mean milliseconds of a question's search."""
    rankings, masses, spent = [], [], 0.0
    for text, vector in zip(texts, vectors):
        started = time.perf_counter()
        search.walked.clear()  # a question's first search
        rankings.append(search.scored(text, vector)[0])
        spent += time.perf_counter() - started
        masses.append(search.run(text, vector)[0])
    return rankings, masses, spent * 1000 / len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("entry", help="a ppr entry's name")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1e-4, 1e-5, 1e-6])
    parser.add_argument("--half", choices=["dev", "test"], default="dev")
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split")
    args = parser.parse_args()
    session = api.open_session(args.spec)
    step = next(s for s in session.plan.steps if s.kind == "retrieve"
                and s.name.split(".", 1)[1].split("@")[0] == args.entry)
    inputs = {role: built(session, name) for role, name in step.inputs.items()}
    power = load_strategy(step.config, inputs, session.models).search
    doc_of = dict(read_chunks(built(session, "chunks"), ["chunk_id", "doc_id"]).iter_rows())
    questions = read_questions(built(session, "corpus")).filter(
        pl.col("supporting_doc_ids").list.len() > 0)
    chosen = halves(questions["question_id"], args.seed)[args.half]
    questions = questions.filter(pl.col("question_id").is_in(list(chosen)))
    texts = questions["question"].to_list()
    gold = questions["supporting_doc_ids"].to_list()
    vectors = session.models.embedder_of(step.config["embedder"]).encode(texts)
    base_rankings, base_masses, base_ms = walked(power, texts, vectors)
    print(f"\n{args.spec} {args.entry}, {args.half} half: {len(texts)} questions\n")
    print("| walk | R@5 | overlap@5 with power | mean L1 from power | ms per question |")
    print("|---|---|---|---|---|")
    walks: list[tuple[str, float | None]] = [("power", None)]
    walks += [(f"push ε={e:g}", e) for e in args.epsilons]
    for name, epsilon in walks:
        if epsilon is None:
            rankings, masses, ms = base_rankings, base_masses, base_ms
        else:
            search = copy.copy(power)
            search.push_epsilon, search.walked = epsilon, WalkMemo()
            rankings, masses, ms = walked(search, texts, vectors)
        recall = np.mean([recall_at_k([doc_of[c] for c in r], g, K) or 0.0
                          for r, g in zip(rankings, gold)])
        overlap = np.mean([len(set(r[:K]) & set(b[:K])) / K
                           for r, b in zip(rankings, base_rankings)])
        distance = np.mean([np.abs(m - b).sum() for m, b in zip(masses, base_masses)
                            if m is not None and b is not None])
        print(f"| {name} | {recall:.3f} | {overlap:.3f} | {distance:.2e} | {ms:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
