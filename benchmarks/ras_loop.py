"""RAS's loop figures from a finished run: iterations, plan calls, stops, per-iteration latency
with the LLM's time apart, and the loop's supporting-document recall against a single-shot
retriever at the same number of passages, question by question.

    python benchmarks/ras_loop.py specs/ras_hotpotqa.yaml

For every ras row: questions; mean iterations; LLM requests per question (cached or not);
the share of invalid plan replies; stop reasons; per iteration the mean wall ms without
the LLM (retrieval, text-to-triples, graph merge) and the mean LLM ms (the plan after it);
triples added per iteration and the share of retrieved passages that gave no triple; and
``loop_recall`` vs ``single_recall_same_passages``: each question's supporting-document
recall over every passage the loop retrieved, and that of the row's retriever asked once
for the question (its ranking, cut to the same number of passages).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from statistics import mean

from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.eval.metrics import recall_at_k
from kgrag.steps.retrieve import load_strategy


def loop_figures(traces: list[dict], docs: list[list[str]], single: list[list[str]] | None,
                 gold: list[list[str]]) -> dict:
    steps = [s for t in traces for s in t["steps"]]
    passages = [u for s in steps for u in s["retrieved"]]
    figures = {
        "questions": len(traces),
        "iterations": round(mean(t["iterations"] for t in traces), 2),
        "invalid_plan_share": round(sum(t["invalid_plans"] for t in traces)
                                    / max(1, sum(len(t["plans"]) for t in traces)), 3),
        "stops": dict(Counter(t["stop"] for t in traces)),
        "iteration_ms_without_llm": round(mean(s["ms"] - s["llm_ms"] for s in steps), 1)
        if steps else None,
        "iteration_llm_ms": round(mean(s["llm_ms"] for s in steps), 1) if steps else None,
        "triples_per_iteration": round(mean(s.get("triples_added", 0) for s in steps), 1)
        if steps else None,
        "no_triple_passage_share": round(sum(len(s.get("no_triple_passages", []))
                                             for s in steps) / max(1, len(passages)), 3)}
    loop = [recall_at_k(d, g, len(set(d))) for d, g in zip(docs, gold)]
    kept = [i for i, v in enumerate(loop) if v is not None and docs[i]]
    figures["loop_recall"] = round(mean(loop[i] for i in kept), 4) if kept else None
    if single is not None and kept:
        figures["single_recall_same_passages"] = round(mean(
            recall_at_k(single[i], gold[i], len(set(docs[i]))) for i in kept), 4)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    args = parser.parse_args()
    session = api.open_session(args.spec)
    questions = read_questions(session.artefact("corpus"))
    gold_of = dict(zip(questions["question_id"], questions["supporting_doc_ids"].to_list()))
    text_of = dict(zip(questions["question_id"], questions["question"]))
    for step in session.plan.steps:
        if step.kind != "retrieve" or step.config["strategy"]["strategy"] != "ras" \
                or not session.artefact(step.name).exists():  # a row not run yet
            continue
        table = read_retrieved(session.artefact(step.name))
        ids = table["question_id"].to_list()
        traces = [json.loads(t) for t in table["trace"]]
        loop = load_strategy(step.config, {role: session.artefact(dep)
                                           for role, dep in step.inputs.items()},
                             session.models)
        asked = [text_of[q] for q in ids]
        vectors = session.models.embedder_of(step.config["embedder"]).encode(asked)
        single = [[loop.units.doc[u] for u in loop.retriever.ranking(q, v)]
                  for q, v in zip(asked, vectors)]
        figures = loop_figures(traces, table["doc_ids"].to_list(), single,
                               [gold_of[q] for q in ids])
        figures["llm_requests_per_question"] = round(float(table["llm_calls"].mean()), 2)
        print(step.name, json.dumps(figures))


if __name__ == "__main__":
    main()
