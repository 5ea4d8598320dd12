"""Extractive answers: the LLM chooses the answer among the context's own spans.

Choosing token by token under a grammar of the candidates does not work with a small
model: greedy decoding opens with "The" and is then locked into whichever candidate
starts so ("The idea"). Here each whole candidate is scored instead: its
log-probability as the continuation of the ordinary answer prompt (the same instruction,
worked example and context as a free answer), normalised by its length in tokens to the
power ``LENGTH_NORMALISATION``, so that a long span is not lost for having more tokens
to pay for. The prompt is evaluated once and only the candidates' tokens after it
(``CachedLLM.scores`` shares the prefix), and every score is cached like any call.

The answer is the best-scoring span, verbatim, and it cites every unit shown that holds
it (up to ``MAX_CITATIONS``), so a citation is true by construction. A yes/no question
is answered by the better of " Yes" and " No" (a judgement, which cites nothing). A
context with no candidate gets the escape, "Insufficient information.".

The prompt is the completion rendering whatever ``answer.prompt`` says: a score is the
probability of text continuing a text, and a chat template's turn markers would be
scored with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kgrag.answer.generate import INSUFFICIENT, MAX_CITATIONS, completion_prompt
from kgrag.answer.spans import YES_NO, candidates, read_question, units_holding
from kgrag.models.llm import CachedLLM, Score

# Chosen on the dev halves (docs/results.md, "Extractive answers"): 1 is the mean
# log-probability per token, 0 the span's total.
LENGTH_NORMALISATION = 1.0
DEFAULT_CANDIDATES = 24


@dataclass(frozen=True)
class Extracted:
    """An extractive answer: its text, the units it cites (1-based numbers among those
    shown), what it is (``span``, ``judgement`` for yes/no, ``escape``), how many
    candidates the LLM scored and the tokens that cost."""

    text: str
    cited: list[int]
    kind: str
    scored: int
    tokens_in: int


def _value(mean: float, tokens: int) -> float:
    return mean * tokens ** (1.0 - LENGTH_NORMALISATION)


def _tokens_in(scores: Sequence[Score]) -> int:
    """The prompt's tokens once, and each candidate's: what the shared prefix costs."""
    return scores[0].tokens - scores[0].target_tokens + sum(s.target_tokens for s in scores)


def extractive_answer(llm: CachedLLM, units: Sequence[str], question: str, *,
                      limit: int = DEFAULT_CANDIDATES) -> Extracted:
    """The span of ``units`` the LLM scores best as the answer to ``question``."""
    prompt = completion_prompt("\n\n".join(units), question)
    if read_question(question).yes_no and units:
        scores = llm.scores([(prompt, f" {word.capitalize()}") for word in YES_NO])
        best = max(range(2), key=lambda i: _value(scores[i].mean, scores[i].target_tokens))
        return Extracted(YES_NO[best], [], "judgement", 2, _tokens_in(scores))
    found = candidates(units, question, limit)
    if not found:
        return Extracted(INSUFFICIENT, [], "escape", 0, 0)
    scores = llm.scores([(prompt, f" {c.text}") for c in found])
    best = max(range(len(found)),
               key=lambda i: (_value(scores[i].mean, scores[i].target_tokens), -i))
    text = found[best].text
    cited = [i + 1 for i in units_holding(text, units)][:MAX_CITATIONS]
    return Extracted(text, cited, "span", len(found), _tokens_in(scores))
