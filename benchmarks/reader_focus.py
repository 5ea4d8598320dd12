"""How many evidence sentences an extractive answer reads (``answer.focus``), chosen on
the dev half of a sample.

    python benchmarks/reader_focus.py specs/reader/hotpotqa.yaml [--half dev|test]
        [--rows dense] [--focus 0,4,8,12] [--limit N] [--bootstrap 1000]

For each question of each row: the free answer from the whole context (the baseline,
``mode: free``) and, for each ``focus`` N, the model's free answer from the N sentences
of the context most like the question (``kgrag.answer.focus``) and the extractive answer
it snaps to (``kgrag.answer.reader.read`` with ``mode: extractive, focus: N``; N = 0 is
the whole context). Yes/no questions are left out: their judgement does not read the
focus. Every call is cached, so a rerun costs nothing. F1 per column with a 95 %
percentile-bootstrap interval over questions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bootstrap import interval
from benchmarks.reader_halves import load_rows
from kgrag import api
from kgrag.answer.focus import focused
from kgrag.answer.generate import answer
from kgrag.answer.hygiene import mend
from kgrag.answer.matching import f1_score
from kgrag.answer.reader import read
from kgrag.answer.spans import read_question


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("--half", choices=("dev", "test"), default="dev")
    parser.add_argument("--rows", default="dense", help="comma-separated rows (and gold)")
    parser.add_argument("--focus", default="0,4,8,12", help="sentences, comma-separated")
    parser.add_argument("--limit", type=int, help="the half's first N questions only")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split")
    args = parser.parse_args(argv)
    session = api.open_session(args.spec)
    llm, embedder = session.models.llm("answerer"), session.models.embedder
    free = {**session.spec.answer, "mode": "free", "cite": False}
    questions, rows, _ = load_rows(session, args.half, args.seed, args.limit, args.rows,
                                   run=False)
    sizes = [int(n) for n in args.focus.split(",")]
    rng = np.random.default_rng(0)
    print(f"\n{args.spec}, {args.half} half ({questions.height} questions), "
          f"{session.spec.models['llm']['model']}\n")
    print("| row | reader | n | F1 [95 %] |")
    print("|---|---|---|---|")
    for name, (table, contexts, layouts) in rows.items():
        f1: dict[str, list[float]] = {"free, whole context": []}
        for n, (question, golds, parts, layout) in enumerate(zip(
                table["question"], table["answers"].to_list(), contexts, layouts), 1):
            if read_question(question).yes_no:
                continue
            units = [p.text for p in parts]
            f1["free, whole context"].append(
                f1_score(read(llm, units, question, free, layout).text, golds))
            for size in sizes:
                if size:
                    text, _ = answer(llm, focused(units, question, embedder, size), question,
                                     max_tokens=free["max_tokens"], style=free["prompt"])
                    f1.setdefault(f"free, focus {size}", []).append(
                        f1_score(mend(text, units, question)[0], golds))
                span = read(llm, units, question, {**free, "mode": "extractive", "focus": size},
                            None, embedder)
                f1.setdefault(f"extractive, focus {size}", []).append(
                    f1_score(span.text, golds))
            print(f"  [{name}] {n}/{table.height}", file=sys.stderr, flush=True)
        for reader, values in f1.items():
            print(f"| {name} | {reader} | {len(values)} | "
                  f"{interval(np.array(values), args.bootstrap, rng)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
