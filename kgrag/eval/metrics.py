"""Answer and retrieval metrics.

EM / F1 follow the SQuAD evaluation script's normalisation (lower case, no
punctuation, no articles, single spaces), take the maximum over the gold
answer and its aliases, and, as in HotpotQA's and KET-RAG's scripts, give F1 0
when a yes / no / no-answer prediction and gold disagree (``kgrag.answer.matching``,
which the reader matches its own answers with too).

Citation precision and recall compare the documents of the units an answer cites with
the question's supporting documents (a unit supports when its document does).

Context recall is exact: it compares character spans of retrieved chunks with
the spans of gold sentences, so it needs no LLM judge.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kgrag.answer.matching import normalize_answer

Span = tuple[str, int, int]
"""(doc_id, start, end): the characters ``text[start:end]`` of one document."""


def covers(context: str, golds: Sequence[str]) -> float:
    """1.0 when a normalised gold answer or alias occurs in the normalised context
    as a whole-word sequence (so "1" does not match inside "1914")."""
    haystack = f" {normalize_answer(context)} "
    return float(any(n and f" {n} " in haystack for n in map(normalize_answer, golds)))


def recall_at_k(ranked_doc_ids: Sequence[str], supporting: Sequence[str], k: int) -> float | None:
    """Fraction of supporting documents among the first ``k`` distinct retrieved documents;
    None for a question with no supporting documents (left out of the mean)."""
    if not supporting:
        return None
    top = list(dict.fromkeys(ranked_doc_ids))[:k]
    return len(set(top) & set(supporting)) / len(set(supporting))


def context_recall(retrieved_spans: Sequence[Span], gold_spans: Sequence[Span]) -> float | None:
    """Fraction of gold sentences lying wholly inside the retrieved text of their document;
    None for a question with no gold sentences (left out of the mean).

    Chunks overlap and may cut a sentence in two, so a sentence counts as
    retrieved when the union of the retrieved spans covers it, even if no
    single chunk does; a partly covered sentence does not count.
    """
    if not gold_spans:
        return None
    merged: dict[str, tuple[list[int], list[int]]] = {}
    for doc_id, start, end in sorted(retrieved_spans):
        starts, ends = merged.setdefault(doc_id, ([], []))
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    present = 0
    for doc_id, start, end in gold_spans:
        starts, ends = merged.get(doc_id, ([], []))
        i = bisect.bisect_right(starts, start) - 1  # the last interval starting at or before
        present += i >= 0 and end <= ends[i]
    return present / len(gold_spans)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


# KGQA answers (ReG, SubgraphRAG): the predictions are the reply's lines holding "ans:",
# each the text after it; a prediction matches a gold answer when the normalised gold is a
# substring of the normalised prediction (SubgraphRAG's evaluation code).


def answer_lines(reply: str) -> list[str]:
    """The predictions of an ``ans:``-lines reply, in order."""
    return [line.split("ans:", 1)[1].strip() for line in reply.splitlines() if "ans:" in line]


def _matches(prediction: str, gold: str) -> bool:
    target = normalize_answer(gold)
    return bool(target) and target in normalize_answer(prediction)


def hit(predictions: Sequence[str], golds: Sequence[str], k: int | None = None) -> float:
    """1.0 when one of the first ``k`` predictions (all: None) matches a gold answer."""
    return float(any(_matches(p, g) for p in predictions[:k] for g in golds))


@dataclass(frozen=True)
class AnswerCounts:
    """One question's counts for F1: predictions that match a gold answer, gold answers
    that the predictions (joined) match, and how many of each there are."""

    correct: int
    predicted: int
    recalled: int
    gold: int

    @classmethod
    def of(cls, predictions: Sequence[str], golds: Sequence[str]) -> AnswerCounts:
        joined = " ".join(predictions)
        return cls(sum(any(_matches(p, g) for g in golds) for p in predictions),
                   len(predictions), sum(_matches(joined, g) for g in golds), len(golds))

    def f1(self) -> float:
        """Per-question F1 (0 without predictions), what Macro-F1 averages."""
        return _harmonic(self.correct / self.predicted if self.predicted else 0.0,
                         self.recalled / self.gold if self.gold else 0.0)


def micro_f1(counts: Sequence[AnswerCounts]) -> float:
    """F1 of the precision and recall of the summed counts."""
    predicted, gold = sum(c.predicted for c in counts), sum(c.gold for c in counts)
    return _harmonic(sum(c.correct for c in counts) / predicted if predicted else 0.0,
                     sum(c.recalled for c in counts) / gold if gold else 0.0)


def _harmonic(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def answer_coverage(context: str, golds: Sequence[str]) -> float:
    """The share of gold answers the context names (each as ``covers`` finds it)."""
    return sum(covers(context, [g]) for g in golds) / len(golds) if golds else 0.0


def citation_precision(cited_docs: Sequence[str], supporting: Sequence[str]) -> float | None:
    """The share of cited units whose document is a supporting one; None for an answer
    that cites nothing or a question without supporting documents (left out of the mean:
    an answer without citations counts in the share of answers citing, ``cited``)."""
    if not cited_docs or not supporting:
        return None
    gold = set(supporting)
    return sum(doc in gold for doc in cited_docs) / len(cited_docs)


def citation_recall(cited_docs: Sequence[str], supporting: Sequence[str]) -> float | None:
    """The share of supporting documents some cited unit comes from (0 for an answer that
    cites nothing); None for a question without supporting documents."""
    if not supporting:
        return None
    return len(set(cited_docs) & set(supporting)) / len(set(supporting))
