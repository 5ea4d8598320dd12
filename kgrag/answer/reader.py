"""One answer as a spec's ``answer`` section asks for it: the one place the answer step,
``kgrag query`` and the reader benchmark turn a question and its context into an answer.

``mode: free`` generates (citing the numbered parts with ``cite``) and mends a short
reply's defects (``kgrag.answer.hygiene``); ``mode: extractive`` has the model answer
freely from the context's evidence sentences (``answer.focus``, ``kgrag.answer.focus``),
snaps that answer to the nearest span of the parts, or scores the spans when none is near
(``kgrag.answer.extractive``), and cites the parts that hold it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kgrag.answer.extractive import DEFAULT_CANDIDATES, extractive_answer
from kgrag.answer.focus import DEFAULT_FOCUS
from kgrag.answer.generate import INSUFFICIENT, answer, cited_answer
from kgrag.answer.hygiene import mend
from kgrag.models.embed.embedder import CachedEmbedder
from kgrag.models.llm import CachedLLM


def focus_of(settings: Mapping[str, Any]) -> int:
    """The evidence sentences an extractive answer reads (``answer.focus``; absent: the
    default, 0: the whole context)."""
    focus = settings.get("focus")
    return DEFAULT_FOCUS if focus is None else int(focus)


@dataclass(frozen=True)
class Reply:
    """An answer, the parts it cites (1-based), the numbers it wrote (valid or not; a
    generated citation's), what it is (``sound`` or a mended defect for a free answer;
    ``span``, ``judgement`` or ``escape`` for an extractive one) and its tokens."""

    text: str
    cited: list[int]
    numbers: list[int]
    kind: str
    tokens_in: int
    tokens_out: int


def read(llm: CachedLLM, parts: Sequence[str], question: str, settings: Mapping[str, Any],
         context: str | None = None, embedder: CachedEmbedder | None = None) -> Reply:
    """The answer to ``question`` from the context's ``parts`` (the strategy's own layout
    ``context`` when given: what a free answer without citations reads); ``embedder``
    picks an extractive answer's evidence sentences (``answer.focus``)."""
    if settings.get("mode", "free") == "extractive":
        got = extractive_answer(llm, parts, question, style=settings["prompt"],
                                max_tokens=settings["max_tokens"], context=context,
                                limit=settings.get("candidates") or DEFAULT_CANDIDATES,
                                focus=focus_of(settings), embedder=embedder)
        return Reply(got.text, got.cited, got.cited, got.kind, got.tokens_in, got.tokens_out)
    style, length = settings["prompt"], settings["length"]
    if settings.get("cite"):
        reply, completion = cited_answer(llm, parts, question, max_tokens=settings["max_tokens"],
                                         style=style, length=length)
        text, cited, numbers = reply.text, reply.cited, reply.numbers
    else:
        text, completion = answer(llm, "\n\n".join(parts) if context is None else context,
                                  question, max_tokens=settings["max_tokens"], style=style,
                                  length=length)
        cited, numbers = [], []
    defect = None
    if length == "short":
        text, defect = mend(text, parts, question)
        cited = [] if text == INSUFFICIENT else cited
    return Reply(text, cited, numbers, defect or "sound", completion.tokens_in,
                 completion.tokens_out)
