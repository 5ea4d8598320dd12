"""Keywords: the words of a text minus stop words, punctuation and bare numbers.

KET-RAG (Alg. 3) uses plain words as keyword nodes and counts shared keywords
as the lexical similarity of two chunks. The authors use NLTK's tokenizer and
stop-word list, which need downloaded data; kgrag stays offline, so this
module carries its own rules and a compact English stop-word list.

The rules:

* A word is a run of letters and digits, with internal hyphens or apostrophes
  kept (``Jean-Paul``, ``O'Brien``, ``co-op``). Underscores and all other
  characters separate words. Curly apostrophes become straight ones so both
  spellings give one keyword.
* A trailing possessive ``'s`` is removed (``Tolkien's`` → ``Tolkien``), so a
  name and its possessive are one keyword, as NLTK's split of ``'s`` gives.
* Case is kept (as in the authors' code): ``Apple`` and ``apple`` differ.
  ``lower=True`` lower-cases the keywords once the stop-word rules have run
  (HugRAG's lexical score matches a question's words whatever their case), so
  ``US`` is still an acronym and becomes ``us``.
* Stop words are matched case-insensitively, except for two exceptions.
  An all-caps word of two or more letters is treated as an acronym and kept
  (``US``, ``WHO``, ``IT``). ``may`` and ``will`` are stop words only in
  lowercase, because capitalised they are mostly the month and the name.
* Words without a letter are dropped (``1888``, ``3.5``): bare numbers are
  mostly counts, years and list numbers that link unrelated chunks (the
  authors' lexical similarity is also letters-only). Words that mix letters
  and digits are kept (``1960s``, ``F-16``, ``COVID-19``).
* Single characters are dropped. They are initials and list markers
  (``J. R. R. Tolkien``, ``(a)``) that would otherwise join unrelated chunks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

# Common English function words, written for kgrag (no downloaded list needed).
STOP_WORDS = frozenset({
    # determiners and quantifiers
    "a", "an", "the", "this", "that", "these", "those", "each", "every", "either", "neither",
    "some", "any", "no", "none", "all", "both", "few", "many", "much", "more", "most", "less",
    "least", "other", "another", "such", "own", "same", "several",
    # pronouns
    "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "you", "your",
    "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers",
    "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "one",
    "ones", "who", "whom", "whose", "which", "what", "whatever", "whoever", "whichever",
    # auxiliaries and modals
    "am", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had", "having", "do",
    "does", "did", "doing", "done", "can", "could", "will", "would", "shall", "should", "may",
    "might", "must", "ought", "get", "got",
    # prepositions
    "about", "above", "across", "after", "against", "along", "among", "around", "at", "before",
    "behind", "below", "beneath", "beside", "besides", "between", "beyond", "by", "down",
    "during", "except", "for", "from", "in", "inside", "into", "near", "of", "off", "on", "onto",
    "out", "outside", "over", "past", "since", "through", "throughout", "till", "to", "toward",
    "towards", "under", "underneath", "until", "up", "upon", "via", "with", "within", "without",
    # conjunctions
    "and", "but", "or", "nor", "so", "yet", "if", "then", "than", "because", "as", "while",
    "whereas", "although", "though", "unless", "whether", "once",
    # frequent adverbs
    "here", "there", "when", "where", "why", "how", "again", "further", "also", "just", "only",
    "very", "too", "not", "now", "still", "even", "ever", "never", "always", "often", "already",
    "almost", "quite", "rather", "else", "however", "thus", "therefore", "hence", "instead",
    "perhaps",
    # contractions ('s forms need no entry: the possessive rule strips them)
    "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "hasn't", "haven't",
    "hadn't", "won't", "wouldn't", "can't", "couldn't", "shouldn't", "mustn't", "i'm", "i've",
    "i'd", "i'll", "you're", "you've", "you'd", "you'll", "he'd", "he'll", "she'd", "she'll",
    "we're", "we've", "we'd", "we'll", "they're", "they've", "they'd", "they'll",
})

_LOWERCASE_ONLY_STOP_WORDS = frozenset({"may", "will"})

_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
_POSSESSIVE = ("'s", "'S")


def keywords(text: str, *, lower: bool = False) -> list[str]:
    """Return the keywords of ``text`` in order of occurrence, repeats included.

    Repeats are kept so a caller can count frequencies; the incidence matrix
    (``keyword_matrix``) only records presence.
    """
    found = []
    for word in _WORD.findall(text.replace("’", "'")):
        if word.endswith(_POSSESSIVE):
            word = word[:-2]
        if len(word) > 1 and _has_letter(word) and not _is_stop_word(word):
            found.append(word.lower() if lower else word)
    return found


def keyword_matrix(texts: Sequence[str], *, lower: bool = False
                   ) -> tuple[sp.csr_matrix, list[str]]:
    """Return the binary text × keyword incidence matrix and its vocabulary (the
    keywords of ``keywords(text, lower=lower)``).

    Rows follow ``texts``. Columns are the distinct keywords sorted by code
    point, so the result does not depend on the order in which words were
    first seen. Entries are int32 ones: a product ``X @ X.T`` then counts
    shared keywords exactly, without the overflow a narrower type would risk.
    """
    import scipy.sparse as sp  # imported where a sparse matrix is made, not by every command

    vocabulary: dict[str, int] = {}
    rows: list[int] = []
    columns: list[int] = []
    for row, text in enumerate(texts):
        present = {vocabulary.setdefault(word, len(vocabulary))
                   for word in keywords(text, lower=lower)}
        columns.extend(present)
        rows.extend([row] * len(present))
    words = sorted(vocabulary)
    position = np.empty(len(words), dtype=np.int64)
    position[[vocabulary[word] for word in words]] = np.arange(len(words))
    matrix = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (np.asarray(rows, dtype=np.int64),
                                              position[np.asarray(columns, dtype=np.int64)])),
        shape=(len(texts), len(words)),
    )
    matrix.sort_indices()
    return matrix, words


def _has_letter(word: str) -> bool:
    """True when ``word`` contains a letter (bare numbers are no keywords).

    Word characters are letters and numerals, so a word without a letter is
    one whose characters, apart from hyphens and apostrophes, are all numeric.
    """
    if word[0].isalpha():  # the common case, decided without building a string
        return True
    return not word.replace("-", "").replace("'", "").isnumeric()


def _is_stop_word(word: str) -> bool:
    """Apply the stop-word rules of the module docstring (acronyms, may/will)."""
    lower = word.lower()
    if lower not in STOP_WORDS:
        return False
    if lower in _LOWERCASE_ONLY_STOP_WORDS:
        return word == lower
    return not (word.isupper() and sum(char.isalpha() for char in word) > 1)
