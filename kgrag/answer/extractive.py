"""Extractive answers: the LLM chooses the answer among the context's own spans.

Choosing token by token under a grammar of the candidates does not work with a small
model: greedy decoding opens with "The" and is then locked into whichever candidate
starts so ("The idea"). Here each whole candidate is scored instead, as the continuation
of the ordinary answer prompt (the same instruction, worked example and context as a free
answer): its summed log-probability divided by the square root of its length in tokens.
The mean per token favours long names whose later tokens merely copy the context, the sum
favours the shortest span; the root between them scored best of the three on the dev
halves, and so did it against scores calibrated by the prompt without its question
(docs/results.md, "The reader"). The prompt is evaluated once and only the candidates'
tokens after it (``CachedLLM.scores`` shares the prefix), and every score is cached like
any call.

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


def _scored(llm: CachedLLM, units: Sequence[str], question: str,
            targets: Sequence[str]) -> tuple[list[float], int]:
    """Each target's summed log-probability after the answer prompt over the square root
    of its tokens, and the tokens that cost."""
    prompt = completion_prompt("\n\n".join(units), question)
    scores = llm.scores([(prompt, t) for t in targets])
    return [s.mean * s.target_tokens ** 0.5 for s in scores], _tokens_in(scores)


def _tokens_in(scores: Sequence[Score]) -> int:
    """The prompt's tokens once, and each candidate's: what the shared prefix costs."""
    return scores[0].tokens - scores[0].target_tokens + sum(s.target_tokens for s in scores)


def extractive_answer(llm: CachedLLM, units: Sequence[str], question: str, *,
                      limit: int = DEFAULT_CANDIDATES) -> Extracted:
    """The span of ``units`` the LLM scores best as the answer to ``question``."""
    if read_question(question).yes_no and units:
        values, tokens = _scored(llm, units, question,
                                     [f" {word.capitalize()}" for word in YES_NO])
        best = max(range(2), key=lambda i: values[i])
        return Extracted(YES_NO[best], [], "judgement", 2, tokens)
    found = candidates(units, question, limit)
    if not found:
        return Extracted(INSUFFICIENT, [], "escape", 0, 0)
    values, tokens = _scored(llm, units, question, [f" {c.text}" for c in found])
    best = max(range(len(found)), key=lambda i: (values[i], -i))
    text = found[best].text
    cited = [i + 1 for i in units_holding(text, units)][:MAX_CITATIONS]
    return Extracted(text, cited, "span", len(found), tokens)
