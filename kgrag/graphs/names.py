"""Entity names: the one form that is an entity's identity, and the looser forms names
are compared in.

Every extractor (``llm``, ``nlp``, ``hybrid``) names an entity by ``normalise_name``,
so one thing found by two methods or in two chunks is one node. The other forms
exist because each answers a different question, and each is written once, here:

* ``is_grounded``: does the text contain this name? Case-insensitive, whole words.
* ``surface_key``: could two names be the same entity? Canonicalisation compares
  them with accents folded and ``.``/``'`` deleted, so "U.S.A." meets "USA".
* ``match_form``: does a text mention this name? Evaluation looks for gold names
  in running text, where deleting ``.`` would glue a sentence's last word to the
  next one; so punctuation becomes a space, and "U.S.A." reads "u s a" in name and
  text alike.
"""

from __future__ import annotations

import re
import unicodedata

# Longer names are not names: the extraction schema caps them, and the nlp
# extractor drops mentions past it.
MAX_NAME_CHARS = 60

_NOT_WORD = re.compile(r"[\W_]+")
_DELETED_IN_KEYS = re.compile(r"[.'\u2019]")


def single_spaces(text: str) -> str:
    """Every run of whitespace one space, none at the ends."""
    return " ".join(text.split())


def clean(text: str) -> str:
    """NFKC and single spaces: the model may re-space or re-encode what it copies."""
    return single_spaces(unicodedata.normalize("NFKC", text))


def normalise_name(name: str) -> str:
    """The identity of an entity: NFKC, no surrounding quotes or spaces, single spaces,
    upper case (GraphRAG's convention, so case variants merge into one node)."""
    return clean(name).strip("\"'`").strip().upper()


def is_grounded(name: str, text: str) -> bool:
    """Whether ``name`` occurs in ``text`` as whole words, ignoring case and spacing.

    Whole words, so that a short name such as "AN" is not grounded by "Andaman".
    """
    needle = clean(name).casefold()
    if not needle:
        return False
    pattern = rf"(?<!\w){re.escape(needle)}(?!\w)"
    return re.search(pattern, clean(text).casefold()) is not None


def fold_accents(text: str) -> str:
    """NFKD with the combining marks dropped: "Pál Gábor" becomes "Pal Gabor"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def plain_words(text: str) -> str:
    """The words of ``text`` (letters and digits) separated by single spaces."""
    return single_spaces(_NOT_WORD.sub(" ", text))


def surface_key(name: str) -> str:
    """The form canonicalisation compares names in: accents folded, upper-case,
    ``.``/``'`` deleted, other punctuation a space, whitespace collapsed. Falls back to
    the stripped name when nothing alphanumeric is left."""
    key = plain_words(_DELETED_IN_KEYS.sub("", fold_accents(name).upper()))
    return key or name.strip()


def match_form(text: str) -> str:
    """The form evaluation finds names in texts by: accents dropped, case folded, every
    run of non-word characters one space."""
    return plain_words(fold_accents(text).casefold())
