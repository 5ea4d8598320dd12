"""The evidence sentences: the part of a context a small reader reads before it answers.

Gemma 3 270M names the answer far better from a few sentences than from a budget's worth
of units: with each question's supporting paragraphs alone its free answers score 1.6
to 1.8 times the F1 of those from the 1,000-token dense context, which holds the gold
answer for most questions (docs/results.md, "The reader"): it loses more to distraction
than to missing evidence. So before an
extractive answer the context is cut to the ``sentences`` sentences most like the question
(cosine of the spec's embedder, the vectors cached as every embedding is), kept in the
order the units show them and each under its unit's title line, the title being what
names a passage's subject ("# Copenhagen"). The model answers freely from that, and the
answer still snaps to a span of the whole context (``kgrag.answer.extractive``), so what
is cited is always a unit that was retrieved.

Sentences are spaCy's (the pipeline the candidate spans come from). A unit's title line
(or any heading line) is not part of a sentence. Ties in similarity keep the earlier
sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from kgrag.answer.spans import parse
from kgrag.models.embed.embedder import CachedEmbedder

DEFAULT_FOCUS = 4  # sentences; chosen on the dev halves (docs/results.md, "The reader")
HEADING = re.compile(r"\s*#+\s")  # a Markdown heading line ("# Copenhagen", "## Usage")


def _title(unit: str) -> str:
    first = unit.split("\n", 1)[0]
    return first if first.startswith("# ") else ""


def _without_headings(sentence: Any) -> str:
    """A sentence's text on one line, without the heading lines it opens with: spaCy
    seldom ends a sentence at a unit's title line, so the unit's first sentence comes as
    "# Copenhagen\nCopenhagen is the capital of Denmark." (for 86 % of HotpotQA's units and
    93 % of MuSiQue's, the first 300 of each)."""
    lines = sentence.text.strip().split("\n")
    while lines and HEADING.match(lines[0]):
        lines.pop(0)
    return " ".join(" ".join(lines).split())


def focused(units: Sequence[str], question: str, embedder: CachedEmbedder,
            sentences: int, docs: Sequence[Any] | None = None) -> str:
    """The ``sentences`` sentences of ``units`` (``docs``: their parse, made here when not
    given) most like ``question``, in the units' order, grouped by unit under its title
    line; the units whole when they hold no more."""
    found = [(index, text) for index, doc in enumerate(parse(units) if docs is None else docs)
             for text in map(_without_headings, doc.sents) if text]  # (unit, sentence)
    if len(found) <= sentences:
        return "\n\n".join(units)
    vectors = embedder.encode([question, *(text for _, text in found)])
    similarity = vectors[1:] @ vectors[0]
    kept = sorted(np.argsort(-similarity, kind="stable")[:sentences])
    groups: dict[int, list[str]] = {}
    for i in kept:
        unit, text = found[i]
        groups.setdefault(unit, []).append(text)
    return "\n\n".join("\n".join(filter(None, [_title(units[unit]), " ".join(texts)]))
                       for unit, texts in groups.items())
