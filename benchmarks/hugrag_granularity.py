"""HugRAG at the paper's granularity: every row of a finished run on its dev and test halves.

    python benchmarks/hugrag_granularity.py specs/hugrag_holisqa_business_salient.yaml
    python benchmarks/hugrag_granularity.py SPEC --seed 0 --bootstrap 1000

Reads the run's ``retrieve`` (and ``answer``) artefacts, so the spec must have run. For
every query row it prints context recall and recall@5 (and token F1 where answered) on
all its questions and on the dev and test halves of the seeded split by question
(``kgrag.eval.halves``), so a default chosen on dev is reported on test. For hugrag rows
it adds the causal filter's outcomes (how many replies fell back, how many contexts the
top-up refilled and with how many tokens) and the App. E structural metrics
(reachability, gold-node coverage, min hops) with and without gates, each with a 95 %
bootstrap interval over questions, and the interval of the paired difference. Every
answered row's token F1 less the naive row's on the same questions comes with its paired
bootstrap interval. Then the graph build beside the paper's Table 5: nodes, edges,
modules per level and gates.

``--chunks ROW`` also diagnoses how ROW (a hugrag row) ranks chunks, with no graph walk:
context recall on each half of the budget filled by chunks in order of cosine alone
(what naive ranks by), of the hybrid score, and of ROW's MMR chunk seeds followed by the
hybrid order, so a gap to naive can be put down to the score or to the seeds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bootstrap import interval
from kgrag import api
from kgrag.answer.matching import f1_score
from kgrag.contents.answers import read_answers
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions, read_sentences
from kgrag.contents.entities import read_entities
from kgrag.contents.retrieved import read_retrieved
from kgrag.eval.halves import HALVES, halves
from kgrag.eval.metrics import context_recall
from kgrag.eval.registry import EvidenceSpans, StrategyRun, score_strategy
from kgrag.eval.structure import gold_nodes, structural_metrics
from kgrag.retrieval.hugrag.search import hybrid_scores, mmr
from kgrag.steps.retrieve import load_strategy

# The paper's Table 5 (notes: shared/notes/hugrag.md): nodes, edges, L3, L2, L1, L0, modules
PAPER = {"biology": (1714, 1722, 0, 30, 104, 31, 165),
         "business": (2169, 2392, 8, 77, 166, 41, 292)}
STRUCTURE = ("reachability", "gold_coverage", "min_hops")


def per_question_structure(traces: list[dict], golds: list[set[str]]) -> dict[str, list]:
    """Each question's structural figures with and without gates (questions with gold
    nodes; min hops only where a gold node is reached both ways)."""
    out: dict[str, list] = {f"{m}{s}": [] for m in STRUCTURE for s in ("", "_no_gates")}
    for trace, gold in zip(traces, golds):
        one = structural_metrics([trace], [gold])
        if not one["structural_questions"]:
            continue
        for m in ("reachability", "gold_coverage"):
            out[m].append(one[m])
            out[f"{m}_no_gates"].append(one.get(f"{m}_no_gates", np.nan))
        if one.get("min_hops") is not None and one.get("min_hops_no_gates") is not None:
            out["min_hops"].append(one["min_hops"])
            out["min_hops_no_gates"].append(one["min_hops_no_gates"])
    return out


def chunk_orders(session: api.Session, row: str, questions: pl.DataFrame,
                 spans: EvidenceSpans, split: dict[str, set[str]]) -> None:
    """Context recall of three chunk orders for ``row`` (see the module docstring)."""
    step = session.plan.by_name()[f"retrieve.{row}"]
    config = step.config["strategy"]
    inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
    graph = load_strategy(step.config, inputs, session.models).graph
    pool = np.flatnonzero(graph.kind == "chunk")
    vectors = session.models.embedder_of(step.config["embedder"]).encode(
        questions["question"].to_list())
    found: dict[str, dict[str, float]] = {"cosine": {}, "hybrid": {}, "seeds+hybrid": {}}
    for qid, text, vector, gold in zip(questions["question_id"], questions["question"],
                                       vectors, questions["gold_sentence_ids"]):
        gold_spans = [spans.sentences[g] for g in gold if g in spans.sentences]
        cosine = hybrid_scores(graph, text, vector, 1.0)
        hybrid = hybrid_scores(graph, text, vector, config["semantic_weight"])
        seeds = mmr(graph, hybrid, "chunk", config["seed_chunks"], config["mmr_lambda"])
        orders = {"cosine": list(pool[np.argsort(-cosine[pool], kind="stable")]),
                  "hybrid": list(pool[np.argsort(-hybrid[pool], kind="stable")])}
        orders["seeds+hybrid"] = list(dict.fromkeys(seeds + orders["hybrid"]))
        for name, order in orders.items():
            used, kept = 0, []
            for node in order:
                tokens = graph.nodes[node].tokens
                if used + tokens <= config["budget_tokens"]:
                    kept.append(spans.chunks[graph.nodes[node].key])
                    used += tokens
            value = context_recall(kept, gold_spans)
            if value is not None:
                found[name][qid] = value
    print(f"\nchunk orders of {row} (context recall all / dev / test, no graph walk):")
    for name, values in found.items():
        parts = [np.mean(list(values.values()))] + [
            np.mean([v for q, v in values.items() if q in split[h]]) for h in HALVES]
        print(f"  {name}: " + " / ".join(f"{p:.3f}" for p in parts))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--chunks", metavar="ROW", help="diagnose ROW's chunk ranking")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    session = api.open_session(args.spec)
    steps = session.plan.by_name()
    questions = read_questions(session.artefact("corpus"))
    sentences = read_sentences(session.artefact("corpus"))
    chunks = read_chunks(session.artefact("chunks"), ["chunk_id", "doc_id", "start", "end"])
    spans = EvidenceSpans.from_frames(chunks, sentences)
    split = halves(questions["question_id"], args.seed)
    text_of = dict(sentences.select("sentence_id", "text").iter_rows())
    golds_of: dict[str, dict[str, set[str]]] = {}

    print(f"{args.spec}: {questions.height} questions (dev {len(split['dev'])}, "
          f"test {len(split['test'])}, seed {args.seed})")
    print("row | n | context recall all / dev / test | recall@5 all / dev / test | F1 | tokens")
    hug_rows, f1_of = [], {}
    for name, step in steps.items():
        if step.kind != "retrieve":
            continue
        row = name.split(".", 1)[1]
        if not (session.artefact(name) / "retrieved.parquet").exists():
            print(f"{row} | not run yet")
            continue
        retrieved = read_retrieved(session.artefact(name))
        answer_step = f"answer.{row}"
        answers = (read_answers(session.artefact(answer_step))
                   if answer_step in steps and session.artefact(answer_step).exists() else None)
        figures = {}
        for part, ids in (("all", None), *((h, split[h]) for h in HALVES)):
            table = questions.join(retrieved, on="question_id", how="inner")
            if ids is not None:
                table = table.filter(pl.col("question_id").is_in(sorted(ids)))
            answered = []
            if answers is not None:
                said = dict(zip(answers["question_id"], answers["answer"]))
                answered = [(said[q], g) for q, g in zip(table["question_id"], table["answers"])
                            if q in said]
            run = StrategyRun(table, answered, spans)
            figures[part] = (score_strategy("context_recall", run),
                             score_strategy("recall@5", run),
                             score_strategy("f1", run) if answered else None, table.height)
        if answers is not None:
            golds = dict(questions.select("question_id", "answers").iter_rows())
            f1_of[row] = {q: f1_score(a, golds[q]) for q, a in
                          answers.select("question_id", "answer").iter_rows()}
        f1 = figures["all"][2]
        print(f"{row} | {figures['all'][3]} | "
              + " / ".join(f"{figures[p][0]:.3f}" for p in ("all", *HALVES)) + " | "
              + " / ".join(f"{figures[p][1]:.3f}" for p in ("all", *HALVES)) + " | "
              + (f"{f1:.3f}" if f1 is not None else "–")
              + f" | {retrieved['context_tokens'].mean():.0f}")
        if step.config["strategy"]["strategy"] == "hugrag":
            hug_rows.append((row, step, retrieved))

    for row, per_question in f1_of.items():
        if row == "naive" or "naive" not in f1_of:
            continue
        both = sorted(set(per_question) & set(f1_of["naive"]))
        gain = np.array([per_question[q] - f1_of["naive"][q] for q in both])
        print(f"{row}: F1 − naive on {len(both)} questions "
              f"{interval(gain, args.bootstrap, rng)} (paired, 95 % bootstrap)")

    for row, step, retrieved in hug_rows:
        traces = [json.loads(t) for t in retrieved["trace"]]
        outcomes = Counter(t.get("filter", "off").split(",")[0] for t in traces)
        topped = [t["top_up"]["tokens"] for t in traces if t.get("top_up", {}).get("items")]
        beyond = [t.get("chunks_beyond_expansion", 0) for t in traces]
        print(f"\n{row}: filter {dict(outcomes)}; top-up refilled {len(topped)} of "
              f"{len(traces)} contexts (mean {np.mean(topped) if topped else 0:.0f} tokens); "
              f"chunks beyond the expansion per question {np.mean(beyond):.2f}")
        if "rows_in_remainder" in traces[0]:
            print(f"  chunks the walk reached per question "
                  f"{np.mean([t['chunks_walk_reached'] for t in traces]):.2f}; row tokens in "
                  f"the remainder {np.mean([t['rows_in_remainder'] for t in traces]):.0f}")
        graph = session.artefact(step.inputs["graph"]) if "graph" in step.inputs else \
            session.artefact(step.inputs["hierarchy"])
        key = str(graph)
        if key not in golds_of:
            names = read_entities(graph, ["name"])["name"].to_list()
            golds_of[key] = {q: gold_nodes(names, [text_of[s] for s in ids if s in text_of])
                             for q, ids in questions.select("question_id", "gold_sentence_ids")
                             .iter_rows()}
        golds = [golds_of[key].get(q, set()) for q in retrieved["question_id"]]
        per = per_question_structure(traces, golds)
        if "reached_without_gates" not in traces[0]:
            print(f"  {len(per['reachability'])} questions with gold nodes; reachability "
                  f"{interval(np.array(per['reachability']), args.bootstrap, rng)}, coverage "
                  f"{interval(np.array(per['gold_coverage']), args.bootstrap, rng)} (no gates)")
            continue
        print(f"  {len(per['reachability'])} questions with gold nodes "
              "(gates on | off | on − off, 95 % bootstrap):")
        for m in STRUCTURE:
            on, off = np.array(per[m], dtype=float), np.array(per[f"{m}_no_gates"], dtype=float)
            print(f"  {m}: {interval(on, args.bootstrap, rng)} | "
                  f"{interval(off, args.bootstrap, rng)} | "
                  f"{interval(on - off, args.bootstrap, rng)}")

    if args.chunks:
        chunk_orders(session, args.chunks, questions, spans, split)
    domain = next((d for d in PAPER if d in str(session.spec.data["corpus"]["path"])), None)
    print("\nbuild | nodes | edges | L0 / L1 / L2 / L3 | modules | gates | unclustered")
    for name, step in steps.items():
        record = session.artefact(name) / "build.json"
        if step.kind not in ("hierarchy", "gates") or not record.exists():
            continue
        notes = json.loads(record.read_text()).get("notes", {})
        if step.kind == "hierarchy":
            levels = notes.get("modules_per_level", {})
            print(f"{name} | {notes.get('nodes')} | {notes.get('edges')} | "
                  + " / ".join(str(levels.get(f"L{k}", 0)) for k in range(4))
                  + f" | {notes.get('modules')} | | {notes.get('unclustered_entities')}")
        else:
            print(f"{name} | | | | | {notes.get('gates')} ({notes.get('checks')} checks) |")
    if domain:
        nodes, edges, l3, l2, l1, l0, modules = PAPER[domain]
        print(f"paper ({domain}) | {nodes} | {edges} | {l0} / {l1} / {l2} / {l3} | {modules} "
              "| not reported |")


if __name__ == "__main__":
    main(sys.argv[1:])
