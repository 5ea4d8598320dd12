"""The candidate answers of a context: spans of its units that a short answer can be.

A small reader writes garbage when it generates (a number repeated to the token limit, a
unit's title line copied, a word of the prompt's worked example), yet the gold answer is a
span of the context it was handed for most questions. Extractive answering
(``kgrag.answer.extractive``) lets the LLM choose among these spans instead, so every answer
is text of a unit and can cite it.

The candidates come from spaCy's parse of each unit (the bundled ``en_core_web_sm``):
named entities, noun chunks without their leading determiner, numbers, the unit's
title, and the names of code it writes (dotted, snake_case or called names, which
spaCy's tokens do not cut out: ``heapq.heappushpop(heap`` is one token). A span of lone
letters ("s" of "2,814 s") is left out: a free answer that shares only that letter with
it snapped to it. A span whose words all occur in the question is left out (a question
rarely asks for what it names), except in a choice question ("…, A or B?"), whose answer
is one of the names it gives. Before the LLM sees them, the candidates are ranked by a
cheap prior, the answer type the question's wh-word asks for (who → a person, when → a
date, which function → a name of code …) first, then how many of the question's words
share a sentence with the span, then the unit's rank; a free answer snaps to the first of
the nearest, and only the best ``limit`` are scored by the LLM. A yes/no question ("Is …",
"Did …") is answered yes or no: those answers are judgements, not spans, and cite
nothing.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kgrag.models.pipelines import load_pipeline, resolve_pipeline

PIPELINE = "en_core_web_sm"
YES_NO = ("yes", "no")

_AUXILIARIES = {"is", "are", "was", "were", "do", "does", "did", "can", "could", "has",
                "have", "had", "will", "would", "should", "shall", "may", "might", "must"}
# The entity labels a wh-phrase asks for; the first phrase that opens the question (or
# follows its first word, "In which year …") decides.
_ASKED = (
    (re.compile(r"\b(when|what year|which year|what date|what decade|what century)\b"),
     {"DATE", "TIME"}),
    (re.compile(r"\bhow (many|much)\b"), {"CARDINAL", "QUANTITY", "MONEY", "PERCENT"}),
    (re.compile(r"\bhow (long|old)\b"), {"DATE", "TIME", "QUANTITY", "CARDINAL"}),
    (re.compile(r"\b(who|whom|whose)\b"), {"PERSON", "ORG", "NORP"}),
    (re.compile(r"\b(where|which (city|country|state|town|county|region|continent)|what "
                r"(city|country|state|town|county|region|continent))\b"),
     {"GPE", "LOC", "FAC"}),
    (re.compile(r"\b(which|what) (\w+ )?(function|method|class|module|attribute|parameter|"
                r"argument|exception|option|command|flag|variable|constant|keyword)s?\b"),
     {"CODE"}),
)
_DROP = str.maketrans("", "", string.punctuation)
# A name of code: dotted from a lower-case name, each later part lower-case or with a
# capital inside (``json.dumps``, ``textwrap.TextWrapper``; not "U.S", "Ph.D" or the
# "election.The" of a lost space), snake_case (``bisect_left``) or a lower-case name
# called (``dedent(``; not 2Wiki's "Copping(born …"), not inside a path, an address or a
# longer dotted name.
_CODE = re.compile(r"(?<![\w./@:-])(?:[a-z_]\w+(?:\.(?:[a-z_]\w+|[A-Z]\w*[A-Z_]\w*))+"
                   r"|[A-Za-z]\w*_\w*[A-Za-z0-9]|[a-z_]\w*(?=\())(?![\w/@])")
_STOP = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "and", "or", "is",
         "was", "are", "were", "what", "which", "who", "whom", "whose", "when", "where",
         "how", "did", "does", "do", "that", "this", "with", "from", "as", "its", "their",
         "his", "her", "it", "be", "been", "has", "have", "had"}


def words(text: str) -> list[str]:
    """Lower-case words without punctuation (how spans and questions are compared)."""
    return text.lower().translate(_DROP).split()


@dataclass(frozen=True)
class Candidate:
    """A span of unit ``unit`` (0-based, in the order shown) that may be the answer."""

    text: str
    unit: int
    label: str  # spaCy's entity label, NOUN for a noun chunk, TITLE for the unit's title
    prior: tuple[float, ...]  # larger is better: asked type, question words nearby, rank


@dataclass(frozen=True)
class Question:
    """What the question asks for: ``yes_no``, the entity labels of its wh-phrase, the
    options of a choice question, and its content words."""

    yes_no: bool
    asked: frozenset[str]
    options: tuple[str, ...]
    content: frozenset[str]


def read_question(question: str) -> Question:
    text = question.strip().lower()
    first = text.split(" ", 1)[0] if text else ""
    asked: frozenset[str] = frozenset()
    opening = " ".join(text.split()[:4])
    for pattern, labels in _ASKED:
        if pattern.search(opening):
            asked = frozenset(labels)
            break
    options: tuple[str, ...] = ()
    choice = re.search(r",\s*([^,?]+?)\s+or\s+([^,?]+?)\s*\??$", question.strip())
    if choice:
        options = (choice.group(1), choice.group(2))
    content = frozenset(w for w in words(question) if w not in _STOP)
    return Question(first in _AUXILIARIES and not options, asked, options, content)


@functools.cache
def _nlp() -> Any:
    """The spaCy pipeline spans and sentences come from, loaded once."""
    return load_pipeline(resolve_pipeline(PIPELINE))


def _trimmed(span: Any) -> Any:
    """A span without its leading determiner or possessive ("the", "his") or trailing
    punctuation."""
    start = span.start
    while start < span.end - 1 and span.doc[start].dep_ in ("det", "poss", "predet"):
        start += 1
    end = span.end
    while end > start + 1 and span.doc[end - 1].is_punct:
        end -= 1
    return span.doc[start:end]


def parse(units: Sequence[str]) -> list[Any]:
    """spaCy's parse of each unit: what the candidate spans and the evidence sentences
    (``kgrag.answer.focus``) are read from, parsed once for both."""
    return list(_nlp().pipe(units, disable=["lemmatizer"]))


def candidates(units: Sequence[str], question: str, limit: int | None,
               docs: Sequence[Any] | None = None) -> list[Candidate]:
    """The best ``limit`` candidate spans of ``units`` (``docs``: their parse, made here
    when not given) for ``question`` by the prior (all of them when ``limit`` is None;
    each distinct text once, from the first unit that holds it), best first; a yes/no
    question's are empty (``read_question`` says it is one)."""
    asked = read_question(question)
    if asked.yes_no:
        return []
    options = [set(words(o)) - _STOP for o in asked.options]
    found: dict[str, Candidate] = {}
    for index, doc in enumerate(parse(units) if docs is None else docs):
        spans: list[tuple[Any, str]] = [(_trimmed(e), e.label_) for e in doc.ents]
        spans += [(_trimmed(c), "NOUN") for c in doc.noun_chunks]
        spans += [(doc[t.i:t.i + 1], "CARDINAL") for t in doc if t.like_num]
        title = units[index].split("\n", 1)[0]
        if title.startswith("# ") and doc.char_span(2, len(title)) is not None:
            spans.insert(0, (doc.char_span(2, len(title)), "TITLE"))
        named = [(span.text.strip(), span, label) for span, label in spans]
        named += _code_names(doc)
        for text, span, label in named:
            key = " ".join(words(text))
            if not key or key in found or text.startswith("#") or "\n" in text:
                continue
            mine = set(key.split())
            if not any(len(w) > 1 or w.isdigit() for w in mine):
                continue  # a lone letter: a unit ("2,814 s") or a label, never an answer
            if options:
                if not any(mine & o for o in options):
                    continue
            elif mine <= asked.content | _STOP:
                continue
            near = len(asked.content & set(words(span.sent.text)))
            if span.start_char < len(title):  # a span of the title line: the unit's name
                label = "TITLE" if label == "NOUN" else label
            if label != "CODE":  # what a person reads: "cls", not ", cls" (the same words)
                text = text.lstrip(string.punctuation + " ")
            found[key] = Candidate(text, index, label,
                                   (float(label in asked.asked), float(near), -float(index)))
    return sorted(found.values(), key=lambda c: c.prior, reverse=True)[:limit]


def _code_names(doc: Any) -> list[tuple[str, Any, str]]:
    """The names of code a unit writes (``heapq.heappushpop``, ``bisect_left``,
    ``dedent(`` …), and a dotted name's first and last parts (its module, its own name),
    each with the span of tokens around it (spaCy's tokens hold ``heapq.heappushpop(heap``
    whole, so no entity or noun chunk gives the name itself): what a question about a
    library's documentation asks for."""
    out = []
    for match in _CODE.finditer(doc.text):
        parts = [(match.start(), match.group())]
        if "." in match.group():
            first, last = match.group().split(".", 1)[0], match.group().rsplit(".", 1)[1]
            parts += [(match.start(), first), (match.end() - len(last), last)]
        for start, name in parts:
            span = doc.char_span(start, start + len(name), alignment_mode="expand")
            if span is not None:
                out.append((name, span, "CODE"))
    return out


def occurrence(span: str, text: str, *, ignore_case: bool = False) -> tuple[int, int] | None:
    """Where ``span`` first stands in ``text`` as whole words, if it does: not inside a
    longer word or number ("1,000" does not stand in "1,000,000", "Lyon" not in "Lyonnais")."""
    if not span.strip():
        return None
    pattern = rf"(?<!\w)(?<!\w[.,]){re.escape(span)}(?![.,]?\w)"
    found = re.search(pattern, text, re.IGNORECASE if ignore_case else 0)
    return None if found is None else found.span()


def units_holding(text: str, units: Sequence[str]) -> list[int]:
    """The (0-based) units that hold ``text`` verbatim, as whole words, in order."""
    return [i for i, unit in enumerate(units) if occurrence(text, unit) is not None]
