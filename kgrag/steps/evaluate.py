"""Step ``evaluate``: one metrics row per query strategy and one cost row per graph build
→ metrics.json.

``context_recall`` reads the chunk spans and the corpus' gold sentence spans
only when it is asked for, so other evaluations stay as cheap as before. A
``hugrag`` row on a corpus with gold sentences also gets HugRAG's structural
metrics (App. E, ``kgrag.eval.structure``), from the entities of its hierarchy
build and the expansions its retrieval traced.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from kgrag.eval.builds import build_row
from kgrag.eval.report import EvidenceSpans, strategy_row
from kgrag.eval.structure import gold_nodes, structural_metrics
from kgrag.pipeline.artefacts import BUILD_RECORD
from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext
from kgrag.retrieval.hugrag import ENTITIES_FILE
from kgrag.retrieval.units import CHUNKS_FILE
from kgrag.steps.answer import ANSWERS
from kgrag.steps.corpus import QUESTIONS, SENTENCES
from kgrag.steps.retrieve import RETRIEVED

METRICS = "metrics.json"


@step_kind("evaluate", "6", publish=(METRICS,))
def evaluate(ctx: StepContext) -> None:
    questions = pl.read_parquet(ctx.input("corpus") / QUESTIONS)
    sentences = pl.read_parquet(ctx.input("corpus") / SENTENCES)
    spans = None
    if "context_recall" in ctx.config["metrics"]:
        chunks = pl.read_parquet(ctx.input("chunks") / CHUNKS_FILE,
                                 columns=["chunk_id", "doc_id", "start", "end"])
        spans = EvidenceSpans.from_frames(chunks, sentences)
    gold_of: dict[Path, dict[str, set[str]]] = {}  # per hierarchy build, computed once
    rows = []
    for strategy in ctx.config["strategies"]:
        name = strategy["name"]
        retrieved = pl.read_parquet(ctx.input(f"retrieve.{name}") / RETRIEVED)
        answers_dir = ctx.inputs.get(f"answer.{name}")
        answers = None if answers_dir is None else pl.read_parquet(answers_dir / ANSWERS)
        row = strategy_row(name, strategy["strategy"], ctx.config["metrics"], questions,
                           retrieved, answers, spans)
        graph = ctx.inputs.get(f"graph.{name}")
        if graph is not None and not sentences.is_empty():
            if graph not in gold_of:
                gold_of[graph] = _gold_nodes(graph, questions, sentences)
            golds = gold_of[graph]
            row.update(structural_metrics(
                [json.loads(t) for t in retrieved["trace"]],
                [golds.get(q, set()) for q in retrieved["question_id"]]))
        rows.append({**row, "params": ctx.config["params"][name]})  # swept values, if any
    builds = [build_row(b["graph"], b["kind"], [_build_record(ctx.input(f"build.{step}"))
                                                for step in b["steps"]])
              for b in ctx.config["builds"]]
    result = {"dataset": ctx.config["dataset"], "n_questions": questions.height, "rows": rows,
              "builds": builds}
    (ctx.out_dir / METRICS).write_text(json.dumps(result, indent=2) + "\n")


def _build_record(artefact: Path) -> dict | None:
    """The record of the run that built ``artefact``; None for one built by an older kgrag."""
    path = artefact / BUILD_RECORD
    return json.loads(path.read_text()) if path.exists() else None


def _gold_nodes(graph: Path, questions: pl.DataFrame, sentences: pl.DataFrame
                ) -> dict[str, set[str]]:
    """Question id → the entities of one hierarchy build named in its gold sentences."""
    text = dict(sentences.select("sentence_id", "text").iter_rows())
    names = pl.read_parquet(graph / ENTITIES_FILE, columns=["name"])["name"].to_list()
    return {qid: gold_nodes(names, [text[s] for s in ids if s in text])
            for qid, ids in questions.select("question_id", "gold_sentence_ids").iter_rows()}
