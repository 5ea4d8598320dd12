"""RAS's rows against the single shot at equal passages, on the dev and test halves
(``kgrag.eval.halves``) of a spec whose ras rows have run: tune on dev, report test.

    python benchmarks/ras_halves.py specs/ras_scale_musique.yaml [--run] [--only a,b]

With ``--run`` it first runs the ras rows' retrieve steps and only the steps they read
(not the answers, not the training of a row that is not asked for); ``--only`` keeps
the rows whose entry name is listed; ``--train-only`` runs only what the rows read (the
Graph-LLM's training: one bounded piece under a CPU lock) and reports nothing. An
interrupted run (Ctrl-C, or SIGTERM: ``timeout``) says so in one line and resumes
through the call cache and the Graph-LLM training's kept state.

For every ras row (few-shot, trained, oracle…) and each half, over the questions the row
retrieved for that have supporting passages: ``n``; ``recall@5`` and ``recall@10`` of
the passages in the order the loop retrieved them (as the evaluate step counts them);
``coverage`` (a gold answer in the row's context); ``iterations``; and the row's
retriever asked once for the question: ``single@5``, ``single@10`` (its first 5 / 10
passages: the same number as the loop's recall@k) and ``single_same`` against
``loop_all``: the recall of every passage the loop retrieved and of the single shot's
first as many passages. A gain at 10 passages needs the loop's second retrieval to find
what the question's own ranking puts below its 10th passage.
"""

from __future__ import annotations

import argparse
import json
import sys
from statistics import mean

from kgrag import api
from kgrag.cli import EXIT_USER_ERROR
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.errors import KgragError, interrupted, stop_on_sigterm
from kgrag.eval.halves import HALVES, halves
from kgrag.eval.metrics import covers, recall_at_k
from kgrag.pipeline.runner import run_plan
from kgrag.steps.retrieve import load_strategy


def _mean(values: list[float]) -> float | None:
    return round(mean(values), 4) if values else None


def row_figures(rows: list[dict]) -> dict:
    """The figures of one row on one half (each ``rows`` entry: one question)."""
    return {"n": len(rows), **{key: _mean([r[key] for r in rows]) for key in (
        "recall@5", "recall@10", "single@5", "single@10", "loop_all", "single_same",
        "coverage", "iterations")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--seed", type=int, default=0, help="the halves' seed")
    parser.add_argument("--run", action="store_true", help="run the ras rows first")
    parser.add_argument("--only", help="comma-separated entry names: only these rows")
    parser.add_argument("--train-only", action="store_true",
                        help="with --run: only the steps the rows read (their training), "
                             "not the rows themselves, and no report")
    args = parser.parse_args()
    stop_on_sigterm()
    try:
        report(args)
    except KgragError as exc:  # bad input: one line, as the CLI says it
        print(f"kgrag: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    except KeyboardInterrupt as stop:
        print(interrupted(stop), file=sys.stderr)
        sys.exit(130)


def report(args: argparse.Namespace) -> None:
    """Run the rows asked for (with ``--run``), then print each row's figures per half."""
    session = api.open_session(args.spec)
    only = set(args.only.split(",")) if args.only else None
    rows = [s for s in session.plan.steps if s.kind == "retrieve"
            and s.config["strategy"]["strategy"] == "ras"
            and (only is None or s.config["strategy"]["name"] in only)]
    if args.run:
        steps = session.plan.upstream([s.name for s in rows])
        if args.train_only:
            steps = [s for s in steps if s not in rows]
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=steps)
        if args.train_only:
            return
    questions = read_questions(session.artefact("corpus"))
    split = halves(questions["question_id"], args.seed)
    gold_of = dict(zip(questions["question_id"], questions["supporting_doc_ids"].to_list()))
    text_of = dict(zip(questions["question_id"], questions["question"]))
    answers_of = dict(zip(questions["question_id"], questions["answers"].to_list()))
    for step in rows:
        if not session.artefact(step.name).exists():  # a row not run yet
            continue
        table = read_retrieved(session.artefact(step.name))
        loop = load_strategy(step.config, {role: session.artefact(dep)
                                           for role, dep in step.inputs.items()},
                             session.models)
        ids = [q for q in table["question_id"].to_list() if gold_of[q]]
        vectors = session.models.embedder_of(step.config["embedder"]).encode(
            [text_of[q] for q in ids])
        single = {q: [loop.units.doc[u] for u in loop.retriever.ranking(text_of[q], v)]
                  for q, v in zip(ids, vectors)}
        per_question = {}
        for qid, docs, context, trace in table.select(
                "question_id", "doc_ids", "context", "trace").iter_rows():
            if qid not in single:
                continue
            gold, passages = gold_of[qid], len(dict.fromkeys(docs))
            per_question[qid] = {
                "recall@5": recall_at_k(docs, gold, 5), "recall@10": recall_at_k(docs, gold, 10),
                "single@5": recall_at_k(single[qid], gold, 5),
                "single@10": recall_at_k(single[qid], gold, 10),
                "loop_all": recall_at_k(docs, gold, passages),
                "single_same": recall_at_k(single[qid], gold, passages),
                "coverage": covers(context, answers_of[qid]),
                "iterations": json.loads(trace)["iterations"]}
        figures = {half: row_figures([r for q, r in per_question.items() if q in split[half]])
                   for half in HALVES}
        print(step.name, json.dumps(figures))


if __name__ == "__main__":
    main()
