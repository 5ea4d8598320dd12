"""The defects a small model's free answer shows, found and mended after generation.

Measured on the bundled Gemma 3 270M (issue 41's probe of 12 documents and the shared
samples' test halves, docs/results.md): a number or symbol repeated to the token limit
(``1,088 | 1,088 | 1,088 …``, ``𝒢s 𝒢s 𝒢s``), a unit's title line copied whole
(``# KET-RAG: A Cost-Efficient…``), and a word of the prompt's worked example given as the
answer to an unrelated question (``Copenhagen`` for a question about PowerPC). A grammar
cannot forbid a repetition, and constraining every answer slows Gemma's 262k-token
vocabulary, so each defect is checked on the reply instead:

* a repeated run is cut at its first repetition (the first item may well be the answer);
* a copied title line, or an answer naming the worked example that neither the context
  nor the question names, becomes the escape: the model found no answer in the context.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kgrag.answer.generate import EXAMPLE_CONTEXT, EXAMPLE_QUESTION, INSUFFICIENT
from kgrag.answer.spans import words

_ITEM = re.compile(r"[^\s|,;/]+")
# The worked example's own names: an answer holding one that the real context lacks
# comes from the example.
EXAMPLE_WORDS = frozenset(w for w in words(f"{EXAMPLE_CONTEXT} {EXAMPLE_QUESTION}")
                          if w[:1].isdigit() or w in {"christmas", "copenhagen", "denmark",
                                                      "chess", "capital", "tournament"})
DEFECTS = ("repeated", "title_line", "example_leak")


def _cut_repetition(answer: str) -> str | None:
    """``answer`` up to the item that repeats an earlier one (an item: a run of
    characters between spaces, bars, commas, semicolons or slashes, compared without
    punctuation); None when no item repeats."""
    seen: set[str] = set()
    for match in _ITEM.finditer(answer):
        key = "".join(words(match.group())) or match.group()
        if key in seen:
            return answer[:match.start()].rstrip(" |,;/")
        seen.add(key)
    return None


def mend(answer: str, units: Sequence[str], question: str) -> tuple[str, str | None]:
    """The answer with its defect mended, and which defect it had (one of ``DEFECTS``,
    or None)."""
    if answer == INSUFFICIENT:
        return answer, None
    if answer.startswith("#"):  # a unit's "# Title" line
        return INSUFFICIENT, "title_line"
    leaked = set(words(answer)) & EXAMPLE_WORDS
    if leaked - set(words(" ".join(units))) - set(words(question)):
        return INSUFFICIENT, "example_leak"
    cut = _cut_repetition(answer)
    if cut is not None:
        return (cut or INSUFFICIENT), "repeated"
    return answer, None
