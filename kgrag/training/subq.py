"""RAS's training data, HotpotQA-SUBQ (Jiang et al., App. B, Algorithm 1), on a benchmark's
training questions.

For each question Q with supporting documents d_0..d_n (in the order the dataset lists
them: HotpotQA's ``supporting_facts``) and gold answer A:

1. closed-book check: the spec's LLM answers Q with no context; when the answer matches
   A (exact match after normalisation), the samples are (Q → ``[NO_RETRIEVAL]``) and the
   answering sample (Q → A), and nothing else;
2. otherwise one sub-query per document, in order, written by the spec's LLM from Q, the
   document and the earlier sub-queries (one grammar-constrained call each, cached);
3. g_i = text-to-triples of d_i (the spec's extraction, as the strategy's loop), and for
   i = 0..n the planning sample (history of (subq_j, g_j), j ≤ i → ``[SUBQ] subq_{i+1}``,
   or ``[SUFFICIENT]`` at i = n, with then the answering sample → A).

Deviations, each for a reason: the paper's Claude filter of supporting documents is not
run (HotpotQA's supporting facts already name the helpful paragraphs); one planning
sample with an empty history labelled ``[SUBQ] subq_0`` is added per retrieving question
(the notes' ambiguity 4: the inference loop asks the planner before anything is
retrieved, and without it the planner would only ever see ``[NO_RETRIEVAL]`` there); no
Self-RAG answering subsets (ASQA, Arc-Easy) are added. The prompts are RAS's text
(``kgrag.training.ras_text``), which the strategy's loop reads too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import mean, median

from kgrag.answer.matching import exact_match
from kgrag.models.llm import CachedLLM
from kgrag.training.ras_text import (
    NO_RETRIEVAL,
    PLAN_GRAMMAR,
    SUBQ,
    SUFFICIENT,
    Triple,
    answer_input,
    history,
    plan_input,
    render,
)

SUBQ_MAX_TOKENS = 48
CLOSED_BOOK_MAX_TOKENS = 24
SUBQ_INSTRUCTION = (
    "Write one simple question that the document below answers on its own and that helps "
    "answer the main question. Do not repeat an earlier sub-question.")
# the plan grammar's sub-query rule alone: one line ending in a question mark
SUBQ_GRAMMAR = 'root ::= "[SUBQ] " subq\n' + PLAN_GRAMMAR.split("\n", 1)[1]


@dataclass(frozen=True)
class Document:
    title: str
    text: str


@dataclass(frozen=True)
class Labelled:
    """One sample with what the label shares and statistics count: its task ("plan" or
    "answer"), its question and the number of sub-queries in its history."""

    task: str
    question_id: str
    prompt: str
    target: str
    subgraphs: list[list[Triple]]
    subqueries: int


def closed_book_prompt(question: str) -> str:
    return ("Answer the question with the shortest possible answer: a name, a date, a "
            f"number or a short phrase.\n\nQuestion: {question}\nAnswer:")


def closed_book(llm: CachedLLM, question: str, answers: Sequence[str], style: str) -> bool:
    """Whether the LLM answers Q right with no context (first line, exact match)."""
    reply = llm.ask(closed_book_prompt(question), style=style, max_tokens=CLOSED_BOOK_MAX_TOKENS,
                    stop=["\n"]).text.strip()
    return bool(reply) and exact_match(reply, list(answers)) == 1.0


def subquery(llm: CachedLLM, question: str, document: Document, earlier: list[str],
             style: str) -> str:
    """One sub-query for ``document``, from Q and the earlier sub-queries; empty when the
    reply is none (``subqueries`` falls back to the title)."""
    asked = "\n".join(f"- {q}" for q in earlier) or "(none)"
    prompt = (f"{SUBQ_INSTRUCTION}\n\nMain question: {question}\nEarlier sub-questions:\n"
              f"{asked}\nDocument: {document.title}\n{document.text}\n\nSub-question:")
    reply = llm.ask(prompt, style=style, max_tokens=SUBQ_MAX_TOKENS, grammar=SUBQ_GRAMMAR).text
    text = " ".join(reply.strip().removeprefix(SUBQ).split())
    return text if text.endswith("?") and len(text) > 1 else ""


def subqueries(llm: CachedLLM, question: str, documents: list[Document], style: str
               ) -> tuple[list[str], int]:
    """One sub-query per document, in order, each from Q, its document and the earlier
    ones; a reply that is no sub-query becomes the document's title as a question. Also
    returns how many did (fallbacks)."""
    asked: list[str] = []
    fallbacks = 0
    for document in documents:
        written = subquery(llm, question, document, asked, style)
        fallbacks += not written
        asked.append(written or f"What does {document.title} say?")
    return asked, fallbacks


def samples_of(question_id: str, question: str, answer: str, documents: list[Document],
               known: bool, subqueries: list[str], triples: list[list[Triple]]
               ) -> list[Labelled]:
    """Algorithm 1's samples for one question (``known``: the closed-book check passed)."""
    if known:
        return [Labelled("plan", question_id, plan_input(history([], question)), NO_RETRIEVAL,
                         [], 0),
                Labelled("answer", question_id, answer_input(history([], question)), answer,
                         [], 0)]
    out = [Labelled("plan", question_id, plan_input(history([], question)),
                    f"{SUBQ} {subqueries[0]}", [], 0)]
    steps: list[tuple[str, str]] = []
    graphs: list[list[Triple]] = []
    for i, (subq, found) in enumerate(zip(subqueries, triples)):
        steps.append((subq, render(found)))
        graphs.append(list(found))
        text = history(steps, question)
        label = f"{SUBQ} {subqueries[i + 1]}" if i + 1 < len(documents) else SUFFICIENT
        out.append(Labelled("plan", question_id, plan_input(text), label, list(graphs), i + 1))
    out.append(Labelled("answer", question_id, answer_input(history(steps, question)), answer,
                        list(graphs), len(steps)))
    return out


def label_of(target: str) -> str:
    """A planning target's label: NO_RETRIEVAL, SUBQ or SUFFICIENT."""
    return SUBQ if target.startswith(SUBQ) else target


def statistics(samples: list[Labelled], tokens: Callable[[str], int]) -> dict:
    """The paper's Table 4 shape: sample counts, planning label shares, input / output
    tokens (mean / median / max), sub-queries per sample and graph sizes."""

    def spread(values: list[int]) -> dict:
        return ({"mean": round(mean(values), 1), "median": median(values), "max": max(values)}
                if values else {})

    plans = [s for s in samples if s.task == "plan"]
    answers = [s for s in samples if s.task == "answer"]
    labels = Counter(label_of(s.target) for s in plans)
    figures: dict = {"planning": len(plans), "answering": len(answers),
                     "labels": {k: {"count": labels[k],
                                    "share": round(labels[k] / max(1, len(plans)), 3)}
                                for k in (SUFFICIENT, SUBQ, NO_RETRIEVAL)}}
    for task, group in (("planning", plans), ("answering", answers)):
        nodes = [len({n for g in s.subgraphs for t in g for n in (t[0], t[2])}) for s in group]
        figures[f"{task}_tokens"] = {"input": spread([tokens(s.prompt) for s in group]),
                                     "output": spread([tokens(s.target) for s in group])}
        figures[f"{task}_subqueries"] = spread([s.subqueries for s in group])
        figures[f"{task}_graph"] = {"nodes": spread(nodes),
                                    "edges": spread([sum(map(len, s.subgraphs)) for s in group])}
    return figures
