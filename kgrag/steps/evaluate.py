"""Step ``evaluate``: one metrics row per query strategy → metrics.json (+ per-question rows).

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

from kgrag.eval.report import EvidenceSpans, strategy_row
from kgrag.eval.structure import gold_nodes, structural_metrics
from kgrag.pipeline.registry import step_kind
from kgrag.pipeline.runner import StepContext
from kgrag.retrieval.hugrag import ENTITIES_FILE
from kgrag.retrieval.units import CHUNKS_FILE
from kgrag.steps.answer import ANSWERS
from kgrag.steps.corpus import QUESTIONS, SENTENCES
from kgrag.steps.retrieve import RETRIEVED

METRICS = "metrics.json"


@step_kind("evaluate", "5", publish=(METRICS,))
def evaluate(ctx: StepContext) -> None:
    questions = pl.read_parquet(ctx.input("corpus") / QUESTIONS)
    spans = None
    if "context_recall" in ctx.config["metrics"]:
        chunks = pl.read_parquet(ctx.input("chunks") / CHUNKS_FILE,
                                 columns=["chunk_id", "doc_id", "start", "end"])
        spans = EvidenceSpans.from_frames(chunks,
                                          pl.read_parquet(ctx.input("corpus") / SENTENCES))
    rows = []
    for strategy in ctx.config["strategies"]:
        name = strategy["name"]
        retrieved = pl.read_parquet(ctx.input(f"retrieve.{name}") / RETRIEVED)
        answers_dir = ctx.inputs.get(f"answer.{name}")
        answers = None if answers_dir is None else pl.read_parquet(answers_dir / ANSWERS)
        row = strategy_row(name, strategy["strategy"], ctx.config["metrics"], questions,
                           retrieved, answers, spans)
        graph = ctx.inputs.get(f"graph.{name}")
        if graph is not None:
            row.update(_structure(graph, questions, retrieved, ctx.input("corpus") / SENTENCES))
        rows.append({**row, "params": ctx.config["params"][name]})  # swept values, if any
    result = {"dataset": ctx.config["dataset"], "n_questions": questions.height, "rows": rows}
    (ctx.out_dir / METRICS).write_text(json.dumps(result, indent=2) + "\n")


def _structure(graph: Path, questions: pl.DataFrame, retrieved: pl.DataFrame,
               sentences_file: Path) -> dict[str, float | int | None]:
    """App. E metrics of one hugrag row; empty when the corpus has no gold sentences."""
    sentences = pl.read_parquet(sentences_file, columns=["sentence_id", "text"])
    if sentences.is_empty():
        return {}
    text = dict(sentences.iter_rows())
    names = pl.read_parquet(graph / ENTITIES_FILE, columns=["name"])["name"].to_list()
    table = questions.join(retrieved, on="question_id", how="inner")
    golds = [gold_nodes(names, [text[s] for s in ids if s in text])
             for ids in table["gold_sentence_ids"].to_list()]
    return structural_metrics([json.loads(t) for t in table["trace"]], golds)
