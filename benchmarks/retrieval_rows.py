"""Retrieval rows of a spec, with the seed linking of every row that walks by PPR.

    python benchmarks/retrieval_rows.py specs/ppr_seeds_musique.yaml [--run] [--only a,b]

Without ``--run`` it reads a finished run's retrieve steps. With ``--run`` it first
runs the retrieve steps and only the steps they read, so a spec whose hugrag rows
set ``use_hierarchy: false`` never runs the hierarchy's summaries and gates (one LLM
call per module and per gate check), which ``kgrag run`` would, for the evaluate step
reports every build. ``--only`` keeps the rows whose entry name is listed (every
budget of it), so the rows that need no expensive build can be measured first.

Columns: the evaluate step's (coverage at the row's budget, recall@2 and @5, p50 ms)
and, for rows whose trace lists PPR seeds (``seeds`` for ppr and ket's ppr channel,
``ppr_seeds`` for hugrag's), the share of questions with a seed (``linked``), with a
gold passage's title among the seeds (``gold seeded``), the mean seeds per linked
question, and the share linked through the nearest-name fallback (``nearest``).
"""

from __future__ import annotations

import argparse
import json
import sys

from kgrag import api
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.eval.report import strategy_row
from kgrag.graphs.names import normalise_name
from kgrag.pipeline.runner import run_plan

METRICS = ("coverage", "recall@2", "recall@5")


def rows(session: api.Session, only: set[str] | None) -> list:
    """The retrieve steps, of the entries in ``only`` when given."""
    return [s for s in session.plan.steps if s.kind == "retrieve"
            and (only is None or s.name.split(".", 1)[1].split("@")[0] in only)]


def seeding(traces: list[dict], gold_titles: list[set[str]]) -> dict[str, float] | None:
    """Linking figures of one row, or None for a row that does not walk."""
    seeds = [t.get("seeds", t.get("ppr_seeds")) for t in traces]
    if all(s is None for s in seeds):
        return None
    seeds = [s or {} for s in seeds]
    linked = [s for s in seeds if s]
    n = len(seeds)
    return {"linked": len(linked) / n,
            "gold seeded": sum(bool(g & s.keys()) for g, s in zip(gold_titles, seeds)) / n,
            "seeds": sum(map(len, linked)) / max(1, len(linked)),
            "nearest": sum(bool(t.get("nearest")) for t in traces) / n}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("--run", action="store_true", help="run the retrieve steps first")
    parser.add_argument("--only", help="comma-separated entry names: only these rows")
    args = parser.parse_args(argv)
    session = api.open_session(args.spec)
    retrieve = rows(session, set(args.only.split(",")) if args.only else None)
    if args.run:
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=session.plan.upstream([s.name for s in retrieve]))
    questions = read_questions(session.artefact("corpus"))
    chunks = read_chunks(session.artefact("chunks"), ["doc_id", "title"])
    title = {d: normalise_name(t) for d, t in chunks.unique("doc_id").iter_rows() if t}
    gold = {q: {title[d] for d in docs if d in title} for q, docs in
            questions.select("question_id", "supporting_doc_ids").iter_rows()}
    print("| row | " + " | ".join(METRICS) + " | p50 ms | linked | gold seeded | seeds | "
          "nearest |")
    print("|---" * (len(METRICS) + 6) + "|")
    for step in retrieve:
        if not session.artefact(step.name).exists():
            continue
        strategy = step.config["strategy"]
        retrieved = read_retrieved(session.artefact(step.name))
        row = strategy_row(strategy["name"], strategy["strategy"], METRICS, questions,
                           retrieved, None)
        traces = [json.loads(t) for t in retrieved["trace"]]
        seeds = seeding(traces, [gold[q] for q in retrieved["question_id"]])
        cells = [f"{row[m]:.3f}" for m in METRICS] + [f"{row['retrieval_ms_p50']:.1f}"]
        cells += ([f"{seeds['linked']:.3f}", f"{seeds['gold seeded']:.3f}",
                   f"{seeds['seeds']:.2f}", f"{seeds['nearest']:.3f}"] if seeds else [""] * 4)
        print(f"| {strategy['name']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
