"""The context layout that ``ket``, ``hybrid`` and local search share.

Their contexts are titled sections (``-----Entities-----``, ``-----Sources-----``,
``-----Keyword sources-----`` …) filled in turn from one token budget, which θ
splits between channels (``share``). Filling and rendering live here, so that every
such strategy charges headers and separators the same way and lays out the same
text for the same choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError

SOURCES_HEADER = "-----Sources-----"
TEXT_JOINER = "\n\n"
SECTION_JOINER = "\n\n"


def share(fraction: float, budget: int) -> int:
    """``int(fraction · budget)``, rounded to 9 decimals first so that float noise does
    not lose a token: 1000·(1−0.9) gives 100, not 99."""
    return int(round(fraction * budget, 9))


def best_first(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first; ties go to the lower index, so a
    query's context is a pure function of the index."""
    return np.argsort(-scores, kind="stable")[:k]


def check_theta(config: dict[str, Any]) -> float:
    """θ, the share of the budget a strategy gives its graph channel, checked."""
    theta = config["theta"]
    if not 0.0 <= theta <= 1.0:
        raise KgragError(f"strategy {config['name']!r}: theta must be in [0, 1], got {theta}")
    return theta


@dataclass(frozen=True)
class Section:
    """One titled block of the context: a header line, then items joined by ``joiner``."""

    header: str
    joiner: str
    ids: list[str]
    items: list[str]
    tokens: int  # of the items alone

    def render(self) -> str:
        return self.header + "\n" + self.joiner.join(self.items)


class Layout:
    """Fills sections within a budget and renders them with their exact token count.

    Re-tokenising a whole context costs more than the rest of a KET query, so counts
    are summed from parts counted once: the stored count of each row or unit, and the
    count of each header and separator. The sum is exact for a
    tokenizer that never merges tokens across a newline, such as the bundled
    WordPiece, where whitespace makes no token at all (the tests check it against
    ``Tokenizer.count``). While filling, every section is charged an opening separator
    and every item a joiner, which never undercounts, so a filled context never
    exceeds its budget.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._costs: dict[str, int] = {}

    def cost(self, text: str) -> int:
        """Token count of a fixed string (a header or separator), counted once."""
        if text not in self._costs:
            self._costs[text] = self._tokenizer.count(text)
        return self._costs[text]

    def fill(self, header: str, joiner: str, ranked: Iterable[str], texts: Mapping[str, str],
             sizes: Mapping[str, int], budget: int) -> tuple[Section, int]:
        """Take ids in rank order while they fit (a too-large one is skipped, as in
        ``fill_budget``); return the section and the tokens it may take at most."""
        opening = self.cost(header) + self.cost("\n") + self.cost(SECTION_JOINER)
        step = self.cost(joiner)
        ids: list[str] = []
        used = items = 0
        for unit in ranked:
            size = sizes[unit]
            cost = size + step + (0 if ids else opening)
            if used + cost <= budget:
                ids.append(unit)
                used += cost
                items += size
        return Section(header, joiner, ids, [texts[i] for i in ids], items), used

    def render(self, sections: Iterable[Section]) -> tuple[str, int]:
        """The context text (empty sections left out) and its token count."""
        shown = [s for s in sections if s.ids]
        tokens = sum(self.cost(s.header) + self.cost("\n") + s.tokens
                     + (len(s.ids) - 1) * self.cost(s.joiner) for s in shown)
        tokens += max(0, len(shown) - 1) * self.cost(SECTION_JOINER)
        return SECTION_JOINER.join(s.render() for s in shown), tokens
