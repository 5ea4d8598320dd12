"""RAS's training steps (``kgrag.training.ras``): HotpotQA-SUBQ samples, then the Graph-LLM
with its planner accuracy on held-back samples. The methods live in ``kgrag.training``;
these adapt them to the runner."""

from __future__ import annotations

import json
from pathlib import Path
from shutil import rmtree
from statistics import mean
from typing import Any

import polars as pl

from kgrag.contents.corpus import read_documents
from kgrag.errors import KgragError
from kgrag.graphs.extraction.nlp import Chunk
from kgrag.models.graph_llm import IDENTITY, MODEL
from kgrag.models.served import model_file
from kgrag.retrieval.ras.loop import GRAPH_LLM_PLAN_TOKENS
from kgrag.retrieval.ras.plan import few_shot_plan, parse_plan
from kgrag.retrieval.ras.triples import text_to_triples
from kgrag.steps.step import Counts, StepContext, step_kind
from kgrag.steps.train import training_set
from kgrag.training.ras_text import PLAN_INSTRUCTION
from kgrag.training.split import training_questions
from kgrag.training.subq import (
    Document,
    Labelled,
    closed_book,
    label_of,
    samples_of,
    statistics,
    subqueries,
)

SAMPLES = "samples.parquet"
SAMPLE_SCHEMA = {"task": pl.String, "question_id": pl.String, "prompt": pl.String,
                 "target": pl.String, "subgraphs": pl.String, "subqueries": pl.Int64,
                 "heldback": pl.Boolean}


def subq_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """A closed-book answer and up to four sub-queries (MuSiQue's most supporting
    paragraphs) per question, plus retries of the constrained calls."""
    if counts.questions is None:
        return None
    n = round(config["split"]["fraction"] * counts.questions)
    if config["max_questions"] is not None:
        n = min(n, config["max_questions"])
    return n * (1 + 4 * (1 + config["llm"]["max_retries"]))


@step_kind("ras_subq", "1", max_llm_calls=subq_calls)
def ras_subq(ctx: StepContext) -> None:
    cfg = ctx.config
    questions = training_set(ctx)
    docs = read_documents(ctx.input("corpus"), ["doc_id", "title", "text"])
    by_id = {d: Document(t, x) for d, t, x in docs.iter_rows()}
    llm = ctx.models.llm("answerer")
    to_triples = text_to_triples(cfg["extraction"], ctx.models)
    held = training_questions(questions["question_id"], cfg["heldback"], cfg["split"]["seed"])
    rows: list[dict[str, Any]] = []
    labelled: list[Labelled] = []
    known = no_docs = fallbacks = 0
    for qid, question, answers, supporting in ctx.progress(
            questions.select("question_id", "question", "answers", "supporting_doc_ids")
            .iter_rows(), total=questions.height, desc="subq", unit="question"):
        documents = [by_id[d] for d in supporting if d in by_id]
        if not documents or not answers:
            no_docs += 1
            continue
        if closed_book(llm, question, answers, cfg["prompt"]):
            known += 1
            found = samples_of(qid, question, answers[0], documents, True, [], [])
        else:
            asked, fell_back = subqueries(llm, question, documents, cfg["prompt"])
            fallbacks += fell_back
            triples = to_triples([Chunk(f"{qid}:{i}", d.text, d.title)
                                  for i, d in enumerate(documents)])
            found = samples_of(qid, question, answers[0], documents, False, asked, triples)
        labelled += found
        rows += [{"task": s.task, "question_id": s.question_id, "prompt": s.prompt,
                  "target": s.target, "subgraphs": json.dumps(s.subgraphs),
                  "subqueries": s.subqueries, "heldback": qid in held} for s in found]
    if not rows:
        raise KgragError(f"{ctx.step.name}: no training question has supporting documents "
                         "and an answer, so RAS has no sample to train on")
    pl.DataFrame(rows, schema=SAMPLE_SCHEMA).write_parquet(ctx.out_dir / SAMPLES)
    ctx.notes.update(questions=questions.height, closed_book_known=known,
                     skipped_no_documents=no_docs, subquery_fallbacks=fallbacks,
                     samples=len(rows), heldback_samples=sum(r["heldback"] for r in rows),
                     table4=statistics(labelled, ctx.models.tokenizer.count))


def read_samples(folder: Path) -> list[tuple[Any, bool, str]]:
    """(Sample, held back, task) of every row of a subq step's artefact."""
    from kgrag.training.graph_llm.model import Sample

    table = pl.read_parquet(folder / SAMPLES)
    return [(Sample(p, t, [[tuple(x) for x in g] for g in json.loads(g)]), h, task)
            for p, t, g, h, task in table.select("prompt", "target", "subgraphs", "heldback",
                                                 "task").iter_rows()]


def planner_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """The few-shot planner on each held-back planning sample: unknown until the samples
    are built."""
    return None


@step_kind("ras_graph_llm", "1", max_llm_calls=planner_calls)
def ras_graph_llm(ctx: StepContext) -> None:
    from kgrag.training.graph_llm.model import GraphLLMSettings, load_cached_graph_llm
    from kgrag.training.graph_llm.train import train_graph_llm

    cfg = ctx.config
    rows = read_samples(ctx.input("subq"))
    train = [sample for sample, held, _ in rows if not held]
    if not train:
        raise KgragError(f"{ctx.step.name}: every sample is held back; lower heldback")
    base = ctx.models.model("answerer")
    embedder = ctx.models.embedder_of(cfg["embedder"])
    # the state after each optimiser step is kept until the step is done: a run stopped
    # in the training or in the accuracy below continues from its last step
    report = train_graph_llm(train, GraphLLMSettings(**cfg["settings"]),
                             model_file(base, "RAS's Graph-LLM training"),
                             embedder.encode, ctx.out_dir / MODEL,
                             progress=lambda steps, count: ctx.progress(
                                 steps, total=count, desc="train", unit="step"),
                             resume=ctx.resume_dir)
    (ctx.out_dir / IDENTITY).write_text(json.dumps(
        {"fingerprint": ctx.step.fingerprint, "base_sha256": report["base_sha256"],
         "embedder": cfg["embedder"]}))
    held = [sample for sample, h, task in rows if h and task == "plan"]
    trained = load_cached_graph_llm(ctx.out_dir, ctx.models)
    llm = ctx.models.llm("answerer")

    def right(reply_label: str, sample: Any) -> bool:
        return reply_label == label_of(sample.target)

    scores: dict[str, list[bool]] = {"trained": [], "few_shot": []}
    for sample in ctx.progress(held, total=len(held), desc="planner accuracy", unit="sample"):
        reply = trained.generate(sample.prompt, sample.subgraphs, GRAPH_LLM_PLAN_TOKENS)
        scores["trained"].append(right(label_of(_plan_text(parse_plan(reply))), sample))
        history_text = sample.prompt.removeprefix(PLAN_INSTRUCTION + "\n")
        plan = few_shot_plan(llm, history_text, cfg["prompt"])
        scores["few_shot"].append(right(label_of(_plan_text(plan)), sample))
    ctx.notes.update(
        samples=len(train), heldback_plans=len(held),
        planner_accuracy_trained=round(mean(scores["trained"]), 4) if held else None,
        planner_accuracy_few_shot=round(mean(scores["few_shot"]), 4) if held else None,
        train_wall_s=report["wall_s"], train_pieces=report["pieces"],
        train_peak_mb=report["peak_rss_mb"],
        epoch_losses=[round(x, 4) for x in report["epoch_losses"]],
        truncated_prompts=report["truncated_prompts"])
    rmtree(ctx.resume_dir, ignore_errors=True)


def _plan_text(plan: Any) -> str:
    return f"[SUBQ] {plan.query}" if plan.query else plan.kind
