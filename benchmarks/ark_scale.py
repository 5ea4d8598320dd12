"""ARK at scale in parts under the CPU lock: train some steps of a training spec, or
evaluate the trained models on each sample's held-back half.

    flock /tmp/kgrag-cpu.lock python benchmarks/ark_scale.py train \\
        specs/scale/ark_joint.yaml stage1.ark-gold [stage3.ark ...]
    flock /tmp/kgrag-cpu.lock python benchmarks/ark_scale.py evaluate \\
        specs/scale/ark_joint_musique.yaml [...]

``train`` runs the named steps and only the steps they read, and prints each one's wall
seconds, LLM calls and notes, and each model's folder (the evaluation specs name it).
Every step is fingerprinted and cached, so a part that was interrupted resumes where it
stopped (the alignment's log-probabilities through the call cache, a curriculum at its
last completed stage), and ``kgrag run`` on the spec reuses what ran here.

``evaluate`` runs an evaluation spec's retrieve steps and prints R@2 / R@5 and coverage
(the share of questions whose answer the context holds, at the spec's budget) on each half
of the sample (``kgrag.eval.halves``: the dev half is the training half, the test half
the held-back one), and each trained row's test R@5 less the base embedder's (the row
named ``dense``) and less the best simple baseline's (dense, bm25, fusion).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kgrag

import polars as pl

from benchmarks.graph_search import first_budgets
from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.contents.training import model_dir
from kgrag.eval.halves import HALVES, halves
from kgrag.eval.report import strategy_row
from kgrag.pipeline.runner import run_plan

BASELINES = ("dense", "bm25", "fusion")
METRICS = ("recall@2", "recall@5", "coverage")


def train(spec: str, steps: list[str]) -> None:
    session = api.open_session(spec)
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, steps=session.plan.upstream(steps))
    for step in manifest.steps:
        print(f"{step['name']}: {step['status']}, {step.get('wall_s', 0):.1f} s, "
              f"llm {step.get('llm', {}).get('calls', 0)} calls, "
              f"notes {step.get('notes', {})}")
    for name in steps:
        if name.startswith("stage"):
            print(f"{name} model: {model_dir(session.artefact(name))}")


def measure(spec: str) -> dict[str, dict[str, float]]:
    """Run the spec's retrieve steps (one per entry, its first budget); each entry's
    ``METRICS`` on each half."""
    session = api.open_session(spec)
    steps = first_budgets(session, None)
    run_plan(session.plan, spec=session.spec, models=session.models, run_dir=session.run_dir,
             steps=session.plan.upstream([s.name for s in steps]))
    questions = read_questions(session.artefact("corpus"))
    split = halves(questions["question_id"])
    rows = {}
    for step in steps:
        strategy = step.config["strategy"]
        retrieved = read_retrieved(session.artefact(step.name))
        rows[strategy["name"]] = {
            f"{m} {half}": v for half in HALVES for m, v in strategy_row(
                strategy["name"], strategy["strategy"], METRICS,
                questions.filter(pl.col("question_id").is_in(split[half])), retrieved,
                None).items() if m in METRICS}
    return rows


def evaluate(spec: str) -> None:
    rows = measure(spec)
    best = max(rows[b]["recall@5 test"] for b in BASELINES if b in rows)
    print(f"\n{spec}\n")
    print("| row | " + " | ".join(f"{m} {h}" for h in HALVES for m in METRICS)
          + " | test R@5 − dense | test R@5 − best baseline |")
    print("|---" * (2 * len(METRICS) + 3) + "|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{r[f'{m} {h}']:.3f}" for h in HALVES
                                          for m in METRICS)
              + f" | {r['recall@5 test'] - rows['dense']['recall@5 test']:+.3f} | "
              f"{r['recall@5 test'] - best:+.3f} |")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("what", choices=("train", "evaluate"))
    parser.add_argument("spec")
    parser.add_argument("more", nargs="*", help="train: step names; evaluate: more specs")
    args = parser.parse_args(argv)
    if args.what == "train":
        train(args.spec, args.more)
    else:
        for spec in [args.spec, *args.more]:
            evaluate(spec)


if __name__ == "__main__":
    main(sys.argv[1:])
