"""The reader on one half of a sample: free answers, extractive answers and the
gold-context oracle, side by side, at each retrieve row's context.

    python benchmarks/reader_halves.py specs/reader/musique.yaml [--half dev|test]
        [--run] [--modes free,free-cite,extractive] [--limit N] [--bootstrap 1000]

Every answer goes through ``kgrag.answer.reader.read``, the function the answer step and
``kgrag query`` call, with the spec's LLM and ``answer`` settings (``mode`` replaced per
column: ``free`` without citations, ``free-cite`` generating them, ``extractive``), and
every call is cached, so a rerun costs nothing. Rows: each retrieve step of
the spec (its context laid out as the answer step reads it), and ``gold``, the question's
supporting documents alone (``answer.context: gold``): the reader's ceiling apart from
retrieval. Columns per row and mode: EM and F1 (with a 95 % percentile-bootstrap interval
over questions), and for the extractive mode the paired F1 difference to free with its
interval; ``coverage``, the share of questions whose gold answer occurs in the context
handed over; the free answers' mended defects; the extractive answers' citation figures
(the share of cited span answers verbatim in every part they cite, answer-level and
document-level citation precision); and the median seconds per question over the
questions whose calls all ran the model (none on a warm rerun; for the extractive
mode, the ratio of its mean seconds to free's over the questions both ran cold).

Choose settings on ``--half dev``; report ``--half test``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bootstrap import interval
from kgrag import api
from kgrag.answer import INSUFFICIENT
from kgrag.answer.matching import exact_match, f1_score
from kgrag.answer.parts import context_parts
from kgrag.answer.reader import read
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.eval.halves import halves
from kgrag.eval.metrics import covers
from kgrag.pipeline.runner import run_plan
from kgrag.steps.answer import gold_parts


def answer_all(session: api.Session, table: pl.DataFrame, contexts: list, layouts: list,
               mode: str, doc_of: dict[str, str]) -> dict:
    """Per question: EM, F1, the reply, its timing when it ran the model, citations."""
    llm = session.models.llm("answerer")
    settings = {**session.spec.answer, "mode": "extractive" if mode == "extractive" else "free",
                "cite": mode != "free"}
    out: dict = {"em": [], "f1": [], "kinds": Counter(), "seconds": [], "cold": [],
                 "replies": [], "verbatim": [], "answer_precision": [], "doc_precision": []}
    for question, golds, parts, layout, supporting in zip(
            table["question"], table["answers"].to_list(), contexts, layouts,
            table["supporting_doc_ids"].to_list()):
        before = llm.usage.snapshot()
        started = time.perf_counter()
        reply = read(llm, [p.text for p in parts], question, settings, layout,
                     session.models.embedder)
        seconds = time.perf_counter() - started
        print(f"  [{mode}] {len(out['em']) + 1}/{table.height} {seconds:.1f}s", file=sys.stderr,
              flush=True)
        out["seconds"].append(seconds)
        out["cold"].append(llm.usage.since(before).cache_hits == 0
                           and llm.usage.since(before).calls > 0)
        out["replies"].append(reply)
        out["em"].append(exact_match(reply.text, golds))
        out["f1"].append(f1_score(reply.text, golds))
        out["kinds"][reply.kind] += 1
        if reply.cited:
            cited = [parts[n - 1] for n in reply.cited]
            if reply.kind == "span":
                out["verbatim"].append(all(reply.text in p.text for p in cited))
            out["answer_precision"].append(
                sum(covers(p.text, golds) for p in cited) / len(cited))
            if supporting:
                out["doc_precision"].append(
                    sum(doc_of.get(p.unit_id or "") in set(supporting) for p in cited)
                    / len(cited))
    return out


def cold_seconds(r: dict, free: dict | None) -> str:
    """The median seconds of an answer over the questions whose model calls all ran (none
    on a warm rerun), and, beside another mode's, the ratio of its mean to the free
    answers' mean over the questions both ran cold. An extractive answer makes its own
    calls (the free answer from the evidence sentences, and scores when it snaps to
    nothing), so its seconds are its whole cost."""
    spent = [s for s, cold in zip(r["seconds"], r["cold"]) if cold]
    if not spent:
        return "warm"
    if free is None or r is free:
        return f"{statistics.median(spent):.2f} ({len(spent)})"
    both = [(s, f) for s, f, cold, free_cold in zip(r["seconds"], free["seconds"], r["cold"],
                                                     free["cold"]) if cold and free_cold]
    ratio = (f"; mean {np.mean([s for s, _ in both]) / np.mean([f for _, f in both]):.2f}× "
             f"free over {len(both)}" if both else "")
    return f"{statistics.median(spent):.2f} ({len(spent)}{ratio})"


def load_rows(session: api.Session, half: str, seed: int, limit: int | None,
              wanted_rows: str | None, run: bool) -> tuple[pl.DataFrame, dict, dict]:
    """The half's questions (the first ``limit`` by id), each row's table, parts and
    layouts (the retrieve steps', ``gold``), and each chunk's document; runs the retrieve
    steps first when ``run``."""
    steps = [s for s in session.plan.steps if s.kind == "retrieve"]
    if run:
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=session.plan.upstream([s.name for s in steps]))
    questions = read_questions(session.artefact("corpus"))
    chosen = halves(questions["question_id"], seed)[half]
    questions = questions.filter(pl.col("question_id").is_in(chosen)).sort("question_id")
    if limit:
        questions = questions.head(limit)
    chunks = read_chunks(session.artefact("chunks"), ["chunk_id", "doc_id", "context"])
    text_of = dict(zip(chunks["chunk_id"], chunks["context"]))
    doc_of = dict(zip(chunks["chunk_id"], chunks["doc_id"]))
    rows: dict[str, tuple[pl.DataFrame, list, list]] = {}
    wanted = set(wanted_rows.split(",")) if wanted_rows else None
    for step in steps:
        name = step.name.split(".", 1)[1]
        if wanted is None or name in wanted:
            table = questions.join(read_retrieved(session.artefact(step.name)),
                                   on="question_id", how="inner").sort("question_id")
            rows[name] = (table, [context_parts(u, c, text_of) for u, c in
                                  zip(table["unit_ids"], table["context"])],
                          table["context"].to_list())
    if wanted is None or "gold" in wanted:
        gold = questions.filter(pl.col("supporting_doc_ids").list.len() > 0)
        rows["gold"] = (gold, gold_parts(gold, chunks), [None] * gold.height)
    return questions, rows, doc_of


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("--half", choices=("dev", "test"), default="dev")
    parser.add_argument("--run", action="store_true", help="run the retrieve steps first")
    parser.add_argument("--modes", default="free,extractive")
    parser.add_argument("--rows", help="comma-separated retrieve rows (default: all, and gold)")
    parser.add_argument("--limit", type=int, help="the half's first N questions only")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split")
    args = parser.parse_args(argv)
    session = api.open_session(args.spec)
    questions, rows, doc_of = load_rows(session, args.half, args.seed, args.limit,
                                        args.rows, args.run)
    rng = np.random.default_rng(0)
    modes = args.modes.split(",")
    print(f"\n{args.spec}, {args.half} half ({questions.height} questions), "
          f"{session.spec.models['llm']['model']}\n")
    print("| row | mode | n | coverage | EM | F1 [95 %] | F1 − free [95 %, paired] | kinds | "
          "cited spans verbatim | citation precision answer / doc | s per question (cold) |")
    print("|---" * 11 + "|")
    for name, (table, contexts, layouts) in rows.items():
        coverage = np.mean([covers("\n\n".join(p.text for p in parts), golds)
                            for parts, golds in zip(contexts, table["answers"].to_list())])
        results = {mode: answer_all(session, table, contexts, layouts, mode, doc_of)
                   for mode in modes}
        for mode, r in results.items():
            f1 = np.array(r["f1"])
            paired = (interval(f1 - np.array(results["free"]["f1"]), args.bootstrap, rng)
                      if mode != "free" and "free" in results else "")
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items()))
            verbatim = (f"{sum(r['verbatim'])}/{len(r['verbatim'])}" if r["verbatim"] else "–")
            precision = (f"{np.mean(r['answer_precision']):.3f} / "
                         f"{np.mean(r['doc_precision']):.3f}" if r["answer_precision"] else "–")
            seconds = cold_seconds(r, results.get("free"))
            print(f"| {name} | {mode} | {table.height} | {coverage:.3f} | {np.mean(r['em']):.3f} "
                  f"| {interval(f1, args.bootstrap, rng)} | {paired} | {kinds} | {verbatim} | "
                  f"{precision} | {seconds} |")
    print(f"\nescape: {INSUFFICIENT!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
