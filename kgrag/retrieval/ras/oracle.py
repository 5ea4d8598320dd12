"""RAS's oracle planner (``planning: oracle``): gold sub-questions in place of the planner's.

The oracle replaces only what the planner decides; retrieval per sub-question, text-to-
triples, the graph, the budget and the iteration cap run as for a real planner. Its gap
to a real planner's row is therefore the planner's share, and an oracle that does not
beat the single shot points at the loop, not the model.

Per question the gold plan is its sub-questions in order, then ``[SUFFICIENT]``; the loop
retrieves for the question itself first, as always (the gold plan never says
``[NO_RETRIEVAL]``). Where the sub-questions come from:

* MuSiQue: the question's ``question_decomposition`` (the corpus artefact's
  decompositions). A step's ``#k`` stands for step k's answer; the oracle writes that
  gold answer in, as a planner that read step k's triples would name the entity.
* HotpotQA: HotpotQA-SUBQ's sub-queries (Algorithm 1, ``kgrag.training.subq``): one per
  supporting paragraph, in the order the corpus lists them, written by the spec's LLM
  from the question, that paragraph and the earlier sub-queries (the calls the training
  step makes for its own questions, cached alike).

Any other dataset has no gold decomposition: the spec check refuses the option there
(``ORACLE_SOURCES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgrag.contents.corpus import read_decompositions, read_documents, read_questions
from kgrag.errors import KgragError
from kgrag.retrieval.ras.plan import Plan
from kgrag.training.ras_text import SUBQ, SUFFICIENT
from kgrag.training.subq import Document, subqueries

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

ORACLE_SOURCES = {"musique": "its question_decomposition",
                  "hotpotqa": "HotpotQA-SUBQ's sub-queries of its supporting paragraphs"}
"""The datasets with gold sub-questions, and where they come from."""
STEP_ANSWER = re.compile(r"#(\d+)")

SubqueryWriter = Callable[[str, list[tuple[str, str]]], list[str]]
"""(question, its supporting (title, text) paragraphs in order) → one sub-query each."""


def resolved(steps: list[tuple[str, str]]) -> list[str]:
    """A decomposition's (sub-question, answer) steps as sub-questions, each ``#k``
    replaced by step k's answer (a ``#k`` naming no earlier step stays as written)."""
    out: list[str] = []
    for question, _answer in steps:
        out.append(STEP_ANSWER.sub(lambda m: steps[int(m.group(1)) - 1][1]
                                   if 0 < int(m.group(1)) <= len(out) else m.group(0), question))
    return out


class GoldPlans:
    """Each question's gold sub-questions, by its text: MuSiQue's decompositions as the
    corpus artefact holds them, else HotpotQA-SUBQ's, written on first use so that a run
    asks the LLM only for the questions it retrieves for, and only for the first ``most``
    paragraphs (the loop's iteration cap leaves no room for more)."""

    def __init__(self, corpus: Path, write: SubqueryWriter, most: int) -> None:
        table = read_decompositions(corpus)
        if table is None:
            raise KgragError("planning: oracle reads the corpus's gold decompositions, and "
                             "this corpus artefact predates them; rerun with --force corpus")
        questions = read_questions(corpus)
        steps: dict[str, list[tuple[str, str]]] = {}
        for qid, question, answer in table.sort("question_id", "step").select(
                "question_id", "question", "answer").iter_rows():
            steps.setdefault(qid, []).append((question, answer))
        self.decomposed = bool(steps)
        self.known = {text: resolved(steps[qid]) for qid, text in
                      questions.select("question_id", "question").iter_rows() if qid in steps}
        self.supporting: dict[str, list[tuple[str, str]]] = {}
        if not self.decomposed:
            docs = {d: (t, x) for d, t, x in
                    read_documents(corpus, ["doc_id", "title", "text"]).iter_rows()}
            self.supporting = {text: [docs[d] for d in ids if d in docs][:most] for text, ids
                               in questions.select("question", "supporting_doc_ids").iter_rows()}
        self.write = write

    def __call__(self, question: str) -> list[str]:
        """The question's gold sub-questions; a question without any is an error."""
        if question not in self.known and self.supporting.get(question):
            self.known[question] = self.write(question, self.supporting[question])
        if not self.known.get(question):
            source = "decomposition" if self.decomposed else "supporting paragraph"
            raise KgragError(f"planning: oracle: the question {question!r} has no gold "
                             f"sub-question (no {source} in the corpus)")
        return self.known[question]


def oracle_plan(gold: list[str], question: str, retrieved: int) -> Plan:
    """The gold plan after ``retrieved`` retrievals: retrieve (for the question itself,
    as the loop does first), then each gold sub-question in turn, then SUFFICIENT."""
    if retrieved == 0:
        return Plan(SUBQ, question)
    return Plan(SUBQ, gold[retrieved - 1]) if retrieved <= len(gold) else Plan(SUFFICIENT)


def subquery_writer(resources: Resources) -> Any:
    """HotpotQA-SUBQ's sub-queries of a question's supporting paragraphs by the spec's LLM
    (the oracle's gold where the data has no decomposition)."""

    def write(question: str, paragraphs: list[tuple[str, str]]) -> list[str]:
        if resources.llm is None:
            raise KgragError("planning: oracle writes HotpotQA-SUBQ's sub-queries with the "
                             "spec's LLM, and none is loaded")
        return subqueries(resources.llm, question, [Document(t, x) for t, x in paragraphs],
                          resources.prompt_style)[0]

    return write
