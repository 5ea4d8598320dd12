"""Rule-based sentence splitting with character spans.

Chunking snaps windows to sentence ends and later stages cite sentences, so
we need spans into the original text rather than copies. A few regular
expressions are enough for encyclopedic and scientific prose, and unlike
NLTK or spaCy they need no downloaded data, which keeps kgrag fully offline.

Rules: a sentence ends after ``.``, ``!`` or ``?`` (optionally followed by
closing quotes or brackets) when whitespace and then an uppercase letter, a
digit or an opening quote follow. A single ``.`` does not end a sentence when
it closes a known abbreviation (``Dr.``, ``Inc.``, ``etc.``), a dotted one
(``U.S.``, ``e.g.``) or an initial (``J. R. R. Tolkien``). Decimals never
split because their dot is not followed by whitespace. A blank line (paragraph
break) always ends a sentence, so headings and list items stay separate.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    {
        *("Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Jr", "Sr", "Rev", "Gov", "Sen", "Rep"),  # people
        *("Gen", "Col", "Lt", "Capt", "Sgt", "Mt", "Ft"),  # ranks and places
        *("Inc", "Ltd", "Co", "Corp", "Bros"),  # companies
        *("vs", "etc", "al", "No", "Nos", "Fig", "Vol"),  # references
    }
)

_CANDIDATE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s+(\S))")
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_OPENING_QUOTES = frozenset("\"'“‘")
_LEADING_PUNCTUATION = "\"'“‘([{"
# Only this many characters before a dot are inspected: enough for any abbreviation,
# and it keeps the check constant-time on long documents.
_LONGEST_ABBREVIATION = 24


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Return (start, end) character spans of the sentences in ``text``.

    Spans exclude surrounding whitespace and together cover every
    non-whitespace character, so joining them with the gaps between them
    rebuilds the text exactly.
    """
    cuts = [match.end() for match in _CANDIDATE_END.finditer(text) if _ends_sentence(text, match)]
    cuts.extend(match.start() for match in _PARAGRAPH_BREAK.finditer(text))
    spans = []
    start = 0
    for cut in [*sorted(cuts), len(text)]:
        segment = text[start:cut]
        left = start + len(segment) - len(segment.lstrip())
        right = start + len(segment.rstrip())
        if right > left:
            spans.append((left, right))
        start = cut
    return spans


def sentences(text: str) -> list[str]:
    """Return the sentences of ``text`` as strings (see ``split_sentences``)."""
    return [text[start:end] for start, end in split_sentences(text)]


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    """Decide whether a candidate terminator really closes a sentence."""
    following = match.group(1)
    if not (following.isupper() or following.isdigit() or following in _OPENING_QUOTES):
        return False
    punctuation = match.group(0).rstrip("\"'”’)]")
    if punctuation != ".":
        return True
    before = text[max(0, match.start() - _LONGEST_ABBREVIATION) : match.start()]
    word = before.split()[-1] if before and not before[-1].isspace() else ""
    word = word.lstrip(_LEADING_PUNCTUATION)
    is_initial = len(word) == 1 and word.isupper()
    return not (is_initial or word in ABBREVIATIONS or _DOTTED.fullmatch(word))
