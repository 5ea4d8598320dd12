"""ARK's training steps (``kgrag.training.ark``): alignment, augmentation, one curriculum
stage. The methods live in ``kgrag.training``; these adapt them to the runner."""

from __future__ import annotations

from shutil import copytree, rmtree
from typing import Any

import numpy as np
import polars as pl

from kgrag.contents.chunks import read_chunks
from kgrag.contents.corpus import read_questions
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.training import (
    model_dir,
    read_alignment,
    read_augmented,
    write_alignment,
    write_augmented,
    write_losses,
)
from kgrag.errors import KgragError
from kgrag.graphs.names import match_form
from kgrag.models.llm import InvalidOutput
from kgrag.steps.step import Counts, StepContext, step_kind
from kgrag.training import augmentation
from kgrag.training.alignment import gold_units, score_units
from kgrag.training.ark import GOLD
from kgrag.training.curriculum import Example, Settings, train
from kgrag.training.split import training_questions


def training_set(ctx: StepContext) -> pl.DataFrame:
    """The training questions of the entry's split (at most ``max_questions``), in corpus
    order; a split that trains on none is an error."""
    questions = read_questions(ctx.input("corpus"))
    split = ctx.config["split"]
    chosen = training_questions(questions["question_id"], split["fraction"], split["seed"])
    if not chosen:
        raise KgragError(f"{ctx.step.name}: no training question: {questions.height} "
                         f"questions at train_fraction {split['fraction']}")
    questions = questions.filter(pl.col("question_id").is_in(sorted(chosen)))
    limit = ctx.config["max_questions"]
    return questions if limit is None else questions.head(limit)


def _contains_answer(text: str, answers: list[str]) -> bool:
    form = f" {match_form(text)} "
    return any(match_form(a) and f" {match_form(a)} " in form for a in answers)


def _questions_done(config: dict[str, Any], counts: Counts, *limits: str) -> int | None:
    """How many questions a step works on: the split's training share, at most each of
    the ``limits`` the config sets; None while the question count is unknown."""
    if counts.questions is None:
        return None
    n = round(config["split"]["fraction"] * counts.questions)
    return min([n, *(config[k] for k in limits if config.get(k) is not None)])


def alignment_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """Up to two log-probability calls per candidate of each training question (one
    fewer per term of weight 0)."""
    n = _questions_done(config, counts, "max_questions")
    if config["positives"] == GOLD:
        return 0
    terms = bool(config["weights"]["forward"]) + bool(config["weights"]["backward"])
    return None if n is None else n * config["candidates"] * terms


@step_kind("ark_align", "1", max_llm_calls=alignment_calls)
def ark_align(ctx: StepContext) -> None:
    """Candidates, alignment scores and positives of every training question. A question
    whose answer occurs in none of its candidates has no positive: skipped, counted. The
    oracle (``positives: gold``) takes the candidates from the supporting documents as
    positives and scores nothing; it skips the same questions, so both rows train on one
    question set, and also a question without supporting documents (counted)."""
    cfg = ctx.config
    gold = cfg["positives"] == GOLD
    questions = training_set(ctx)
    unlabelled = 0
    if gold:
        labelled = questions.filter(pl.col("supporting_doc_ids").list.len() > 0)
        if labelled.is_empty():
            raise KgragError(f"{ctx.step.name}: positives: gold needs the training "
                             f"questions' supporting documents, and none of the "
                             f"{questions.height} has any (a questions_file without "
                             "'supporting'?); give a number of positives instead")
        unlabelled, questions = questions.height - labelled.height, labelled
    chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "doc_id", "context"])
    embedder = ctx.models.embedder_of(cfg["base"])
    units = embedder.encode(chunks["context"].to_list())
    asked = embedder.encode(questions["question"].to_list())
    ids, texts = chunks["chunk_id"].to_list(), chunks["context"].to_list()
    docs = chunks["doc_id"].to_list()
    by_doc: dict[str, list[int]] = {}
    for i, doc in enumerate(chunks["doc_id"]):
        by_doc.setdefault(doc, []).append(i)

    def align(llm, item: tuple[dict, np.ndarray]) -> list[dict] | None:
        """One question's candidates and scores (its rows), or None: no candidate holds
        its answer. Runs where the spec's executor runs it; it changes nothing shared."""
        record, vector = item
        cosines = units @ vector
        picked = [i for doc in record["supporting_doc_ids"] for i in by_doc.get(doc, [])]
        for i in np.argsort(-cosines, kind="stable"):
            if len(picked) >= cfg["candidates"]:
                break
            if i not in picked:
                picked.append(int(i))
        picked = picked[:cfg["candidates"]]
        answers = record["answers"]
        if not any(_contains_answer(texts[i], answers) for i in picked):
            return None
        if gold:
            supporting = [docs[i] in record["supporting_doc_ids"] for i in picked]
            scored = gold_units([ids[i] for i in picked], cosines[picked], supporting)
            positive = set(scored.positives(sum(supporting)))
        else:
            scored = score_units(llm, record["question"], answers[0], [ids[i] for i in picked],
                                 [texts[i] for i in picked], cosines[picked], cfg["weights"])
            positive = set(scored.positives(cfg["positives"]))
        return [{"question_id": record["question_id"], "chunk_id": unit,
                 **{t: float(v[j]) for t, v in scored.raw.items()},  # a 0-weight term: null
                 "score": float(scored.combined[j]), "positive": unit in positive}
                for j, unit in enumerate(scored.unit_ids)]

    items = list(zip(questions.iter_rows(named=True), asked))
    aligned = ([align(None, item) for item in ctx.progress(items, total=len(items),
                                                          desc="align", unit="question")]
               if gold else ctx.map_calls("scorer", align, items, desc="align",
                                          unit="question"))
    no_answer = [qid for qid, got in zip(questions["question_id"], aligned) if got is None]
    rows = [row for got in aligned if got is not None for row in got]
    if not rows:
        raise KgragError(f"{ctx.step.name}: no training question has its answer in any "
                         f"candidate unit ({len(no_answer)} skipped); nothing to train on")
    write_alignment(ctx.out_dir, rows)
    ctx.notes.update(questions=questions.height - len(no_answer), scored_units=len(rows),
                     skipped_no_answer=len(no_answer),
                     **({"skipped_no_supporting": unlabelled} if gold else {}))


def augmentation_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """Two subgraphs per training question, one call each, plus retries."""
    n = _questions_done(config, counts, "max_questions", "augment_questions")
    return None if n is None else 2 * n * (1 + config["augmenter"]["llm"]["max_retries"])


@step_kind("ark_augment", "1", max_llm_calls=augmentation_calls)
def ark_augment(ctx: StepContext) -> None:
    """Confusing questions from the large and small PPR subgraph of each aligned
    question; skips (no entity named, a graph too small, a generation that never
    parses) are counted in the notes."""
    cfg = ctx.config
    alignment = read_alignment(ctx.input("align"))
    questions = read_questions(ctx.input("corpus")).filter(
        pl.col("question_id").is_in(alignment["question_id"].unique().implode()))
    if "augment_questions" in cfg:
        questions = questions.head(cfg["augment_questions"])
    entities = read_entities(ctx.input("extract"),
                             ["name", "type", "description", "source_chunk_ids"])
    relationships = read_relationships(ctx.input("extract"),
                                       ["source", "target", "weight", "source_chunk_ids"])
    embedder = ctx.models.embedder_of(cfg["base"])
    llm, style = ctx.models.llm("augmenter"), cfg["augmenter"]["prompt"]
    candidates = {qid: set(frame["chunk_id"]) for (qid,), frame in
                  alignment.group_by(["question_id"], maintain_order=True)}
    entity_rows, relation_rows = _rows_by_chunk(entities), _rows_by_chunk(relationships)
    rows, skipped = [], {"no_entity": 0, "small_graph": 0, "unparsed": 0}
    for record in ctx.progress(questions.iter_rows(named=True), total=questions.height,
                               desc="augment", unit="question"):
        units = candidates[record["question_id"]]
        keep = sorted({i for unit in units for i in entity_rows.get(unit, ())})
        linked = sorted({i for unit in units for i in relation_rows.get(unit, ())})
        names = entities["name"].gather(keep).to_list()
        edges = list(zip(*(relationships[c].gather(linked).to_list()
                           for c in ("source", "target", "weight"))))
        vectors = embedder.encode(names) if names else np.zeros((0, 1), dtype=np.float32)
        graph = augmentation.question_graph(names, entities["type"].gather(keep).to_list(),
                                            entities["description"].gather(keep).to_list(),
                                            edges, vectors, cfg["similarity"])
        answer = record["answers"][0]
        seeds = augmentation.seeds(graph, record["question"], answer)
        if not seeds:
            skipped["no_entity"] += 1
            continue
        ranked = augmentation.ranked(graph, seeds, cfg["damping"], cfg["epsilon"])
        if len(ranked) < 2:
            skipped["small_graph"] += 1
            continue
        for size in ("large", "small"):
            nodes = augmentation.cut(ranked, *cfg[size])
            prompt = augmentation.prompt(graph, nodes, record["question"], answer,
                                         cfg["augmented"])
            try:
                written, _ = llm.ask_json(prompt, augmentation.schema(cfg["augmented"]),
                                          style=style, max_tokens=60 * cfg["augmented"],
                                          validate=augmentation.validated(record["question"]))
            except InvalidOutput:
                skipped["unparsed"] += 1
                continue
            rows += [{"question_id": record["question_id"], "size": size, "question": q}
                     for q in written]
    write_augmented(ctx.out_dir, rows)
    ctx.notes.update(questions=questions.height, augmented=len(rows),
                     **{f"skipped_{why}": n for why, n in skipped.items()})


def _rows_by_chunk(table: pl.DataFrame) -> dict[str, list[int]]:
    """Chunk id → the rows of ``table`` (entities, relationships) extracted from it, so a
    question's graph is looked up, not scanned for, among a corpus's entities."""
    index: dict[str, list[int]] = {}
    for row, chunks in enumerate(table["source_chunk_ids"]):
        for chunk in chunks:
            index.setdefault(chunk, []).append(row)
    return index


@step_kind("ark_stage", "1")
def ark_stage(ctx: StepContext) -> None:
    """One curriculum stage: its examples, then training from the base (stage 1) or the
    previous stage's model; the model and its loss curve are the artefact."""
    cfg = ctx.config
    alignment = read_alignment(ctx.input("align"))
    chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "context"])
    text_of = dict(zip(chunks["chunk_id"], chunks["context"]))
    positives: dict[str, list[str]] = {}
    for qid, unit in alignment.filter("positive").select("question_id", "chunk_id").iter_rows():
        positives.setdefault(qid, []).append(unit)
    if cfg["stage"] == 1:
        questions = read_questions(ctx.input("corpus"))
        asked = dict(zip(questions["question_id"], questions["question"]))
        examples = [Example(asked[qid], text_of[u], (), qid)
                    for qid, units in positives.items() for u in units]
        start = ctx.models.embedder_of(cfg["base"]).settings.path
    else:
        examples = _hard_examples(ctx, positives, text_of, chunks)
        start = model_dir(ctx.input("previous"))
    if not examples:  # every augmented question skipped: the stage keeps its start
        copytree(start, model_dir(ctx.out_dir))
        write_losses(ctx.out_dir, [])
        ctx.notes.update(examples=0, skipped="no augmented question for this stage (see "
                         "the augment step's notes); the previous stage's model is kept")
        return
    settings = Settings(cfg["epochs"], cfg["learning_rate"], cfg["batch_size"],
                        cfg["temperature"], cfg["warmup_steps"], cfg["seed"],
                        cfg["max_seq_length"])
    # the state after each epoch, so a stage interrupted partway continues from its last
    resume = ctx.resume_dir
    curve = train(start, model_dir(ctx.out_dir), examples, settings,
                  lambda steps, total: ctx.progress(steps, total=total, desc="train",
                                                    unit="step"), resume)
    rmtree(resume, ignore_errors=True)
    write_losses(ctx.out_dir, curve)
    ctx.notes.update(examples=len(examples), steps=len(curve),
                     first_loss=round(curve[0]["loss"], 4), last_loss=round(curve[-1]["loss"], 4))


def _hard_examples(ctx: StepContext, positives: dict[str, list[str]], text_of: dict[str, str],
                   chunks: pl.DataFrame) -> list[Example]:
    """Stage 2 (large subgraphs) or 3 (small): each augmented question anchors one
    example with one of its original question's positives (in turn) and the units the
    previous stage's model ranks highest for it that are not positives."""
    cfg = ctx.config
    size = "large" if cfg["stage"] == 2 else "small"
    augmented = read_augmented(ctx.input("augment")).filter(pl.col("size") == size)
    augmented = augmented.filter(pl.col("question_id").is_in(list(positives)))
    if augmented.is_empty():
        return []
    miner = ctx.models.embedder_of(cfg["miner"])
    ids = chunks["chunk_id"].to_list()
    units = miner.encode(chunks["context"].to_list())
    asked = miner.encode(augmented["question"].to_list())
    turn: dict[str, int]  # question id → how many of its examples so far
    examples, turn = [], {}
    for (qid, question), vector in zip(augmented.select("question_id", "question").iter_rows(),
                                       asked):
        own = positives[qid]
        nearest = np.argsort(-(units @ vector), kind="stable")[:cfg["hard_negatives"]]
        negatives = [ids[i] for i in nearest if ids[i] not in own][:cfg["negatives"]]
        k = turn.get(qid, 0)
        turn[qid] = k + 1
        examples.append(Example(question, text_of[own[k % len(own)]],
                                tuple(text_of[n] for n in negatives), qid))
    return examples
