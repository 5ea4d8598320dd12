"""Extractive answers: the answer is one of the context's own spans.

Choosing token by token under a grammar of the candidates does not work with a small
model: greedy decoding opens with "The" and is then locked into whichever candidate
starts so ("The idea"). Nor does ranking whole candidates by the LLM's log-probability
choose well: on the dev halves the best candidate's F1 is 2.5–3.4 times the best-scoring
one's (docs/results.md, "The reader"). What the small model does well is name its answer
freely, in its own words and not always as the context writes it. So the model first
answers freely (the ordinary answer prompt, the reply's defects mended,
``kgrag.answer.hygiene``), and that answer *snaps* to the candidate that shares the most
words with it (token F1, the measure answers are scored by; the prior's order breaks
ties). Every candidate of the context is eligible, since snapping costs no LLM call. Of
twelve rules, snapping had the best mean F1 over the dev halves of the three samples
(``benchmarks/reader_rules.py``).

Only when the free answer shares no word with any candidate (or is the escape) are the
candidates scored, the best ``limit`` by the prior: each as the continuation of the
answer prompt, its summed log-probability divided by the square root of its length in
tokens (the best of the scoring rules; the prompt is evaluated once and only the
candidates' tokens after it, ``CachedLLM.scores`` shares the prefix). That fallback is
the part of an answer's time beyond a free answer's.

The answer is the span, verbatim, and it cites every unit shown that holds it (up to
``MAX_CITATIONS``), so a citation is true by construction. A yes/no question is answered
by the better of " Yes" and " No" (a judgement, which cites nothing). A context with no
candidate gets the escape, "Insufficient information.".

The scoring prompt is the completion rendering whatever ``answer.prompt`` says: a score
is the probability of text continuing a text, and a chat template's turn markers would be
scored with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kgrag.answer.focus import focused
from kgrag.answer.generate import INSUFFICIENT, MAX_CITATIONS, answer, completion_prompt
from kgrag.answer.hygiene import mend
from kgrag.answer.matching import f1_score
from kgrag.answer.spans import YES_NO, Candidate, candidates, parse, read_question, units_holding
from kgrag.models.embed.embedder import CachedEmbedder
from kgrag.models.llm import CachedLLM, Score

DEFAULT_CANDIDATES = 24


@dataclass(frozen=True)
class Extracted:
    """An extractive answer: its text, the units it cites (1-based numbers among those
    shown), what it is (``span``, ``judgement`` for yes/no, ``escape``), how many
    candidates the LLM scored and the tokens the free answer and the scores cost."""

    text: str
    cited: list[int]
    kind: str
    scored: int
    tokens_in: int
    tokens_out: int


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


def nearest(free: str, pool: Sequence[Candidate]) -> Candidate | None:
    """The candidate sharing the most words with the free answer (the first of equals:
    the prior's order), or None when none shares any or the answer is the escape."""
    if free == INSUFFICIENT:
        return None
    overlaps = [f1_score(c.text, [free]) for c in pool]
    best = max(range(len(pool)), key=lambda i: (overlaps[i], -i), default=None)
    return None if best is None or overlaps[best] == 0 else pool[best]


def extractive_answer(llm: CachedLLM, units: Sequence[str], question: str, *,
                      style: str, max_tokens: int | None, context: str | None = None,
                      limit: int = DEFAULT_CANDIDATES, focus: int = 0,
                      embedder: CachedEmbedder | None = None) -> Extracted:
    """The span of ``units`` nearest the free answer to ``question``, or the one the LLM
    scores best when none is near. The free answer is written from the ``focus`` sentences
    of the units most like the question (``kgrag.answer.focus``, by ``embedder``) when
    ``focus`` is set; else from ``context`` when given (the strategy's own layout), else
    from the units."""
    if read_question(question).yes_no and units:
        values, tokens = _scored(llm, units, question,
                                 [f" {word.capitalize()}" for word in YES_NO])
        best = max(range(2), key=lambda i: values[i])
        return Extracted(YES_NO[best], [], "judgement", 2, tokens, 0)
    docs = parse(units)  # one parse for the candidates and the evidence sentences
    pool = candidates(units, question, None, docs)
    if not pool:
        return Extracted(INSUFFICIENT, [], "escape", 0, 0, 0)
    if focus:
        assert embedder is not None, "a focused answer needs the embedder"
        context = focused(units, question, embedder, focus, docs)
    free, completion = answer(llm, "\n\n".join(units) if context is None else context,
                              question, max_tokens=max_tokens, style=style)
    chosen = nearest(mend(free, units, question)[0], pool)
    scored, tokens = 0, completion.tokens_in
    if chosen is None:
        found = pool[:limit]
        values, spent = _scored(llm, units, question, [f" {c.text}" for c in found])
        chosen = found[max(range(len(found)), key=lambda i: (values[i], -i))]
        scored, tokens = len(found), tokens + spent
    cited = [i + 1 for i in units_holding(chosen.text, units)][:MAX_CITATIONS]
    return Extracted(chosen.text, cited, "span", scored, tokens, completion.tokens_out)
