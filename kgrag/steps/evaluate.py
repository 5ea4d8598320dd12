"""Step ``evaluate``: one metrics row per query strategy and one cost row per graph build
→ metrics.json.

Each requested metric is looked up in ``kgrag.eval.registry``, and the step reads
what a requested metric reads only then: the chunk spans and the corpus' gold
sentence spans for ``context_recall``, so other evaluations stay as cheap as before. A
``hugrag`` row on a corpus with gold sentences also gets HugRAG's structural
metrics (App. E, ``kgrag.eval.structure``), from the entities of its hierarchy
build and the expansions its retrieval traced.

The ``extraction`` metric is asked for explicitly, so that the plans of specs
written before it keep their fingerprints. It adds to every build with an
extraction what that made per chunk and how fast (``extraction_figures``) and,
when the corpus has gold triples, their recall (``kgrag.eval.gold``); on a corpus
without gold triples the recall columns are absent, the row says ``gold_triples:
0`` and the step's notes say why.
"""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.contents.answers import read_answers, read_citations
from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions, read_sentences, read_triples
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.extraction import read_counts
from kgrag.contents.metrics import METRICS, write_metrics
from kgrag.contents.retrieved import read_retrieved
from kgrag.corpus.corpus import empty_triples
from kgrag.eval.builds import build_row, training_row
from kgrag.eval.registry import EvidenceSpans, ExtractionBuild, Metric, lookup
from kgrag.eval.report import strategy_row
from kgrag.eval.structure import gold_nodes, structural_metrics
from kgrag.steps.step import BUILD_RECORD, StepContext, step_kind

log = logging.getLogger(__name__)


@step_kind("evaluate", "6", publish=(METRICS,))
def evaluate(ctx: StepContext) -> None:
    questions = read_questions(ctx.input("corpus"))
    sentences = read_sentences(ctx.input("corpus"))
    requested = {name: lookup(name)[0] for name in ctx.config["metrics"]}
    spans = None
    if any(metric.reads == "spans" for metric in requested.values()):
        chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "doc_id", "start", "end"])
        spans = EvidenceSpans.from_frames(chunks, sentences)
    gold_of: dict[Path, dict[str, set[str]]] = {}  # per hierarchy build, computed once
    per_strategy = [name for name, metric in requested.items() if not metric.per_build]
    _say_missing_gold(ctx, requested, questions)
    rows = []
    for strategy in ctx.config["strategies"]:
        name = strategy["name"]
        retrieved = read_retrieved(ctx.input(f"retrieve.{name}"))
        answers_dir = ctx.inputs.get(f"answer.{name}")
        answers = None if answers_dir is None else read_answers(answers_dir)
        citations = None if answers_dir is None else read_citations(answers_dir)
        row = strategy_row(name, strategy["strategy"], per_strategy, questions,
                           retrieved, answers, spans, citations)
        graph = ctx.inputs.get(f"graph.{name}")
        if graph is not None and not sentences.is_empty():
            if graph not in gold_of:
                gold_of[graph] = _gold_nodes(graph, questions, sentences)
            golds = gold_of[graph]
            row.update(structural_metrics(
                [json.loads(t) for t in retrieved["trace"]],
                [golds.get(q, set()) for q in retrieved["question_id"]]))
        rows.append({**row, "params": ctx.config["params"][name]})  # swept values, if any
    records = {step: _build_record(ctx.input(f"build.{step}"))
               for b in ctx.config["builds"] for step in b["steps"]}
    builds = [build_row(b["graph"], b["kind"], [records[step] for step in b["steps"]])
              for b in ctx.config["builds"]]
    per_build = [metric for metric in requested.values() if metric.per_build]
    if per_build:
        _build_metrics(ctx, builds, records, per_build)
    result = {"dataset": ctx.config["dataset"], "n_questions": questions.height, "rows": rows,
              "builds": builds}
    if "training" in ctx.config:  # only specs that train have the key (fingerprints hold)
        result["training"] = [
            training_row(t["name"], t["method"],
                         [(step, _build_record(ctx.input(f"build.{step}"))) for step in t["steps"]])
            for t in ctx.config["training"]]
    write_metrics(ctx.out_dir, result)


def _say_missing_gold(ctx: StepContext, metrics: dict[str, Metric],
                      questions: pl.DataFrame) -> None:
    """Say which metrics lack the gold they read: recall@k reads the questions' supporting
    documents, context_recall their gold sentences. A metric no question has gold for is
    reported as missing (a warning, and a note in the manifest); one only some questions
    have gold for averages over those, and the note says over how many."""
    for metric, registered in metrics.items():
        if registered.gold is None:
            continue
        column, gold, source = registered.gold
        have = questions.filter(pl.col(column).list.len() > 0).height
        if have == 0:
            ctx.notes[metric] = f"not reported: no question has {gold} ({source})"
            log.warning("%s: %s", metric, ctx.notes[metric])
        elif have < questions.height:
            ctx.notes[metric] = (f"the mean over the {have} of {questions.height} questions "
                                 f"with {gold}")


def _build_record(artefact: Path) -> dict | None:
    """The record of the run that built ``artefact``; None for one built by an older kgrag."""
    path = artefact / BUILD_RECORD
    return json.loads(path.read_text()) if path.exists() else None


def _gold_nodes(graph: Path, questions: pl.DataFrame, sentences: pl.DataFrame
                ) -> dict[str, set[str]]:
    """Question id → the entities of one hierarchy build named in its gold sentences."""
    text = dict(sentences.select("sentence_id", "text").iter_rows())
    names = read_entities(graph, ["name"])["name"].to_list()
    return {qid: gold_nodes(names, [text[s] for s in ids if s in text])
            for qid, ids in questions.select("question_id", "gold_sentence_ids").iter_rows()}


def _build_metrics(ctx: StepContext, builds: list[dict[str, Any]],
                   records: dict[str, dict | None], metrics: list[Metric]) -> None:
    """Add the build ``metrics`` (each reads one build's extraction) to the row of every
    build with an ``extract`` step."""
    triples = read_triples(ctx.input("corpus"))
    if triples is None:
        triples = empty_triples()
        ctx.notes["gold_triples"] = ("the corpus artefact predates gold triples; rerun with "
                                     "--force corpus to read them")
    elif triples.is_empty():
        ctx.notes["gold_triples"] = ("none in this corpus (kgrag reads 2Wiki's evidences): "
                                     "gold-triple recall is not reported")
    units = dict(read_chunks(ctx.input("chunks"), ["chunk_id", "context"]).iter_rows())
    for build, row in zip(ctx.config["builds"], builds):
        step = next((s for s in build["steps"] if s.startswith("extract.")), None)
        if step is None:
            continue
        folder = ctx.input(f"build.{step}")
        record, counts = records[step], read_counts(folder)
        llm = None if record is None else record["llm"]
        extraction = ExtractionBuild(
            counts, None if record is None else record["wall_s"],
            None if llm is None else llm["tokens_in"] + llm["tokens_out"],
            {chunk: units[chunk] for chunk in counts["chunk_id"]},
            partial(_graph_tables, folder), triples)
        for metric in metrics:
            row.update(metric.score(extraction))


def _graph_tables(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A build's entities and relationships, read only when a metric asks for them."""
    return read_entities(folder), read_relationships(folder)
