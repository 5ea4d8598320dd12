"""Extractive answers: the LLM chooses the answer among the context's own spans.

Choosing token by token under a grammar of the candidates does not work with a small
model: greedy decoding opens with "The" and is then locked into whichever candidate
starts so ("The idea"). Here each whole candidate is scored instead, as the continuation
of the ordinary answer prompt (the same instruction, worked example and context as a free
answer). A raw log-probability favours what the context makes likely whatever the
question (a long name whose later tokens copy the context, the title of the first unit),
so each candidate's is calibrated by the same candidate's log-probability after the same
prompt with the question left empty: the score is how much the question raises the
candidate (pointwise mutual information with the question), summed over its tokens. On
the dev halves this beat the mean and the sum of the raw log-probabilities on every sample
(docs/results.md, "The reader"). Both prompts share the context, which ``CachedLLM.scores``
evaluates once; only the question and the candidates' tokens come after it, and every
score is cached like any call.

The answer is the best-scoring span, verbatim, and it cites every unit shown that holds
it (up to ``MAX_CITATIONS``), so a citation is true by construction. A yes/no question
is answered by the better of " Yes" and " No", scored the same way (a judgement, which
cites nothing). A context with no candidate gets the escape, "Insufficient information.".

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


def _calibrated(llm: CachedLLM, units: Sequence[str], question: str,
                targets: Sequence[str]) -> tuple[list[float], int]:
    """Each target's summed log-probability after the answer prompt less the same after
    the prompt without its question, and the tokens that cost."""
    context = "\n\n".join(units)
    asked, blank = completion_prompt(context, question), completion_prompt(context, "")
    scores = llm.scores([(asked, t) for t in targets] + [(blank, t) for t in targets])
    with_q, without = scores[:len(targets)], scores[len(targets):]
    values = [(a.mean - b.mean) * a.target_tokens for a, b in zip(with_q, without)]
    return values, _tokens_in(with_q) + _tokens_in(without)


def _tokens_in(scores: Sequence[Score]) -> int:
    """The prompt's tokens once, and each candidate's: what the shared prefix costs."""
    return scores[0].tokens - scores[0].target_tokens + sum(s.target_tokens for s in scores)


def extractive_answer(llm: CachedLLM, units: Sequence[str], question: str, *,
                      limit: int = DEFAULT_CANDIDATES) -> Extracted:
    """The span of ``units`` the LLM scores best as the answer to ``question``."""
    if read_question(question).yes_no and units:
        values, tokens = _calibrated(llm, units, question,
                                     [f" {word.capitalize()}" for word in YES_NO])
        best = max(range(2), key=lambda i: values[i])
        return Extracted(YES_NO[best], [], "judgement", 2, tokens)
    found = candidates(units, question, limit)
    if not found:
        return Extracted(INSUFFICIENT, [], "escape", 0, 0)
    values, tokens = _calibrated(llm, units, question, [f" {c.text}" for c in found])
    best = max(range(len(found)), key=lambda i: (values[i], -i))
    text = found[best].text
    cited = [i + 1 for i in units_holding(text, units)][:MAX_CITATIONS]
    return Extracted(text, cited, "span", len(found), tokens)
