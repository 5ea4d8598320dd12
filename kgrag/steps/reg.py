"""ReG's training steps (``kgrag.training.reg``): weak supervision and the candidate pool,
LLM refinement, retriever training.
The methods live in ``kgrag.training`` and ``kgrag.kg``; these adapt them to the runner."""

from __future__ import annotations

from typing import Any

import numpy as np

from kgrag.contents.corpus import read_questions
from kgrag.contents.kg import KgIndex
from kgrag.contents.training import (
    model_dir,
    read_refined,
    read_supervision,
    write_losses,
    write_refined,
    write_supervision,
)
from kgrag.errors import KgragError
from kgrag.steps.step import Counts, StepContext, step_kind
from kgrag.steps.train import training_set
from kgrag.training import refinement
from kgrag.training.entity_scorer import EntityScorerSettings, train_entity_scorer
from kgrag.training.supervision import path_text, supervise
from kgrag.training.triple_scorer import ScorerSettings, train_triple_scorer


def _stats(values: list[int]) -> dict[str, float]:
    return {"mean": round(float(np.mean(values)), 2), "max": int(max(values))}


@step_kind("reg_supervise", "1")
def reg_supervise(ctx: StepContext) -> None:
    """Weak labels and the merged candidate pool of every training question; a question
    with no topic-answer path in its retrieval graph has no weak label: skipped,
    counted. The notes give the pool's size before and after merging (ReG's Table 1)."""
    questions = training_set(ctx)
    index = KgIndex(ctx.input("kg"))
    rows, candidates, skipped = [], [], []
    for qid, answers in questions.select("question_id", "answers").iter_rows():
        found = index.by_id[qid]
        supervision = supervise(index.kg, found.triples, found.topics, answers)
        if not supervision.weak or supervision.answer is None:  # weak labels: an answer
            skipped.append(qid)
            continue
        rows.append({"question_id": qid, "weak": sorted(supervision.weak),
                     "answer": index.kg.entities[supervision.answer],
                     "pool_before": supervision.pool_before,
                     "pool_after": len(supervision.candidates)})
        candidates += [{"question_id": qid, "candidate": n, "source": c.source,
                        "path": list(c.path), "members": sorted(c.members)}
                       for n, c in enumerate(supervision.candidates)]
    if not rows:
        raise KgragError(f"{ctx.step.name}: no training question has a path from a topic "
                         f"entity to an answer ({len(skipped)} skipped); nothing to train on")
    write_supervision(ctx.out_dir, rows, candidates)
    before = _stats([r["pool_before"] for r in rows])
    after = _stats([r["pool_after"] for r in rows])
    ctx.notes.update(questions=len(rows), skipped_no_path=len(skipped),
                     weak_triples_mean=_stats([len(r["weak"]) for r in rows])["mean"],
                     pool_before_mean=before["mean"], pool_before_max=before["max"],
                     pool_after_mean=after["mean"], pool_after_max=after["max"])


def refine_calls(config: dict[str, Any], counts: Counts) -> int:
    """One call per refined question."""
    return config["refine_questions"]


@step_kind("reg_refine", "1", max_llm_calls=refine_calls)
def reg_refine(ctx: StepContext) -> None:
    """The LLM's selection among each question's first ``max_paths`` candidates, for the
    first ``refine_questions`` supervised questions. The positives are the selected
    candidates' triples; a reply that selects no path shown falls back to the weak
    labels, and so does every question beyond the bound; both are counted."""
    cfg = ctx.config
    supervision, candidates = read_supervision(ctx.input("supervise"))
    questions = read_questions(ctx.input("corpus"))
    asked = {qid: (q, a) for qid, q, a in questions.select(
        "question_id", "question", "answers").iter_rows()}
    by_question: dict[str, list[tuple[list[int], list[int]]]] = {}
    for qid, path, members in candidates.select("question_id", "path", "members").iter_rows():
        by_question.setdefault(qid, []).append((path, members))
    kg = KgIndex(ctx.input("kg")).kg
    llm, style = ctx.models.llm("refiner"), cfg["refiner"]["prompt"]
    rows, outcomes = [], {"refined": 0, "fallback_unparsed": 0, "weak_unrefined": 0}
    for n, (qid, weak) in enumerate(ctx.progress(
            supervision.select("question_id", "weak").iter_rows(), total=supervision.height,
            desc="refine", unit="question")):
        picked: list[int] = []
        shown = by_question[qid][:cfg["max_paths"]]
        if n < cfg["refine_questions"]:
            question, answers = asked[qid]
            reply = llm.ask(refinement.prompt(question, answers,
                                              [path_text(kg, p) for p, _ in shown]),
                            style=style, max_tokens=7 * len(shown) + 2,
                            grammar=refinement.grammar(len(shown)))
            picked = refinement.selected(reply.text, len(shown))
            outcome = "refined" if picked else "fallback_unparsed"
        else:
            outcome = "weak_unrefined"
        positives = sorted({i for k in picked for i in shown[k][1]}) if picked else weak
        outcomes[outcome] += 1
        rows.append({"question_id": qid, "positives": positives, "selected": picked,
                     "outcome": outcome})
    write_refined(ctx.out_dir, rows)
    ctx.notes.update(outcomes)


def gold_labels(ctx: StepContext, index: KgIndex, supervised: list[str]
                ) -> tuple[list[tuple[str, list[int]]], int]:
    """The oracle's positives: each supervised question's gold triples (its supporting
    triples in the corpus) as graph row numbers, and how many questions have none (left
    out; when every one has none, there is nothing to train on: an error)."""
    gold = dict(read_questions(ctx.input("corpus")).select(
        "question_id", "supporting_doc_ids").iter_rows())
    row = {triple_id: i for i, triple_id in enumerate(index.kg.ids)}
    labels = [(qid, [row[t] for t in gold[qid] if t in row]) for qid in supervised]
    kept = [(qid, positives) for qid, positives in labels if positives]
    if not kept:
        raise KgragError(f"{ctx.step.name}: labels: gold, but none of the {len(labels)} "
                         "supervised questions has a gold triple (the corpus's gold_triples "
                         "are empty): nothing to train on; use labels: weak or refined")
    return kept, len(labels) - len(kept)


@step_kind("reg_train", "1")
def reg_train(ctx: StepContext) -> None:
    """The retriever trained on the weak, refined or gold positives of the supervised
    questions, the last ``validation`` share of them held for checkpoint selection; the
    model and its loss curve (one row per epoch) are the artefact; its wall time and peak
    memory are the runner's record of the step."""
    cfg = ctx.config
    index = KgIndex(ctx.input("kg"))
    supervision, _ = read_supervision(ctx.input("supervise"))
    without_gold = 0
    if cfg["labels"] == "gold":
        labels, without_gold = gold_labels(ctx, index, supervision["question_id"].to_list())
    elif cfg["labels"] == "refined":
        labels = list(read_refined(ctx.input("refine")).select(
            "question_id", "positives").iter_rows())
    else:
        labels = list(supervision.select("question_id", "weak").iter_rows())
    vectors = index.question_vectors()
    graphs = [index.question_graph(index.by_id[qid], vectors[qid], set(positives))
              for qid, positives in labels]
    held = round(cfg["validation"] * len(graphs))
    train, validation = graphs[:len(graphs) - held], graphs[len(graphs) - held:]

    def progress(epochs, total):
        return ctx.progress(epochs, total=total, desc="train", unit="epoch")

    if cfg["level"] == "triple":
        scorer = train_triple_scorer(train, ScorerSettings(
            cfg["epochs"], cfg["learning_rate"], cfg["hidden"], cfg["seed"],
            cfg["match_features"]), validation, progress)
    else:
        scorer = train_entity_scorer(train, EntityScorerSettings(
            cfg["epochs"], cfg["learning_rate"], cfg["hidden"], cfg["seed"]), validation,
            progress)
    scorer.save(model_dir(ctx.out_dir))
    write_losses(ctx.out_dir, [{"step": e, "epoch": e, "loss": loss,
                                "learning_rate": cfg["learning_rate"]}
                               for e, loss in enumerate(scorer.losses, start=1)])
    report = scorer.report
    ctx.notes.update(
        questions=report["questions"], validation_questions=report["validation_questions"],
        skipped_no_positive=report["skipped"],
        **({"skipped_no_gold": without_gold} if cfg["labels"] == "gold" else {}),
        triples=int(sum(g.triples for g in train)),
        positives=int(sum(float(g.labels.sum()) for g in train if g.labels is not None)),
        parameters=report["parameters"], best_epoch=report["best_epoch"],
        first_loss=round(scorer.losses[0], 4), last_loss=round(scorer.losses[-1], 4))
