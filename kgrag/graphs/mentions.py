"""Entity mentions in a spaCy parse: what the LLM-free extractor takes as entities.

Mentions are named-entity spans and noun chunks. Noun chunks lose leading
determiners, possessive pronouns and punctuation, and what precedes a possessive
"'s" ("1978's Angi Vera" is about Angi Vera); pronouns, stop-word-only chunks,
chunks inside a named entity and chunks of numbers and dates only are dropped, and so
are NER's bare numbers (CARDINAL, ORDINAL: "20" would join every chunk that counts
twenty of anything). Names lose quote marks and are normalised by
``kgrag.graphs.names.normalise_name``, as on the LLM path, so both methods name an
entity alike. A named entity is typed by
its NER label mapped onto ``ENTITY_TYPES`` (labels without a counterpart, such as
NORP, are ``other``); a noun chunk is a ``concept``, as in LazyGraphRAG's concept
graph.

A chunk's title (encyclopedic paragraphs are about their title) has mentions too,
found by ``title_mentions``: this is what turns a bag of entities into facts about
the paragraph's subject, the object of most 2Wiki gold triples.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kgrag.graphs.names import MAX_NAME_CHARS, normalise_name

NER_TYPES = {"PERSON": "person", "ORG": "organization", "GPE": "geo", "LOC": "geo",
             "FAC": "geo", "EVENT": "event", "WORK_OF_ART": "work", "LAW": "work",
             "DATE": "date", "TIME": "date"}
NUMBER_LABELS = frozenset({"CARDINAL", "ORDINAL"})
NUMERIC_LABELS = NUMBER_LABELS | {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY"}
MONTHS = frozenset({"january", "february", "march", "april", "may", "june", "july",
                    "august", "september", "october", "november", "december"})
DASHES = frozenset({"–", "—", "-", "−"})
# Marks that end no name: a table's pipe, list bullets, dashes.
STRAY_ENDS = "|¦•·‣◦" + "".join(DASHES)
_YEAR = re.compile(r"(?<![\d.,:])\d{3,4}(?![\d.,:]\d)")
SUBJECTS = frozenset({"nsubj", "nsubjpass"})
SUBJECT_PRONOUNS = frozenset({"he", "she", "it", "they"})
POSSESSIVES = frozenset({"his", "her", "its", "their"})


@dataclass(frozen=True)
class Mention:
    """One entity mention: doc tokens ``start:end``, ``root`` the index of its head."""

    name: str
    type: str
    start: int
    end: int
    root: int


@dataclass(frozen=True)
class Title:
    """A chunk's title as the extractor matches it: the entity ``name``, the words of
    the title without a disambiguating parenthesis ("Forbidden Ground (2013 film)"),
    and its ``core`` words, also without a qualifying comma ("Frances Vane,
    Marchioness of Londonderry")."""

    name: str
    words: frozenset[str]
    core: frozenset[str]

    @classmethod
    def of(cls, title: str) -> Title:
        plain = title.split(" (", 1)[0] if title.endswith(")") else title
        return cls(normalise_name(title), _words(plain), _words(plain.split(",")[0]))


def sentence_mentions(sentence: Any, counts: Counter[str]) -> list[Mention]:
    """The named entities and noun chunks of one sentence that survive the filters;
    ``counts`` gets the candidates (``entities_raw``) and the dropped ones
    (``entities_empty``)."""
    doc = sentence.doc
    found: list[Mention] = []
    ents = [piece for e in sentence.ents for piece in (dates(e) if e.label_ == "DATE" else [e])]
    for ent in ents:
        counts["entities_raw"] += 1
        mention = None if ent.label_ in NUMBER_LABELS else _mention(
            ent, NER_TYPES.get(ent.label_, "other"))
        counts["entities_empty"] += mention is None
        found += [mention] if mention else []
    covered = {i for e in ents for i in range(e.start, e.end)}
    numeric = {i for e in ents if e.label_ in NUMERIC_LABELS for i in range(e.start, e.end)}
    for chunk in sentence.noun_chunks:
        counts["entities_raw"] += 1
        mention = _mention(chunk, "concept", possessive_cut=True)
        span = range(mention.start, mention.end) if mention else range(0)
        keep = mention is not None and not (
            doc[mention.root].pos_ == "PRON"
            or all(doc[i].is_stop for i in span)
            or all(i in covered for i in span)
            or all(i in numeric or doc[i].like_num for i in span))
        counts["entities_empty"] += not keep
        found += [mention] if keep and mention else []
    return found


def dates(ent: Any) -> list[Any]:
    """A DATE entity as the dates it holds, repaired where a small pipeline errs on
    encyclopedic life spans: "(July 25, 1925 – March 31, 1986)" comes as one span and
    "(13 July 1899 – 22 October 1977)" as "13 July 1899" and "October 1977". So a span
    is cut at dashes and where a new date starts after a year, and a day number just
    before a span that starts with a month joins it. On 2Wiki this lifts gold-triple
    entity recall from 0.86 to 0.91. English month names only: a no-op elsewhere."""
    doc, start = ent.doc, ent.start
    if start > ent.sent.start and doc[start].lower_ in MONTHS and _is_day(doc[start - 1]):
        start -= 1
    pieces, begin = [], start
    for i in range(start, ent.end):
        token = doc[i]
        starts_date = token.lower_ in MONTHS or (
            _is_day(token) and i + 1 < ent.end and doc[i + 1].lower_ in MONTHS)
        if token.text in DASHES or (i > begin and _is_year(doc[i - 1]) and starts_date):
            pieces += [doc[begin:i]] if i > begin else []
            begin = i + (token.text in DASHES)
    pieces += [doc[begin:ent.end]] if ent.end > begin else []
    for piece in pieces:
        piece.label_ = "DATE"
    return pieces


def title_mentions(sentence: Any, found: list[Mention], title: Title, first: bool
                   ) -> list[Mention]:
    """Where a sentence refers to the chunk's title, as mentions named by the title.

    A proper-noun mention whose words are all title words ("Levy" for "Shawn Levy")
    or hold all its core words ("Frances Anne Vane" for "Frances Vane, Marchioness of
    Londonderry") is the title. Failing that and failing the title's own name, the
    title is where the sentence's topic sits: the subject of the first sentence's
    main verb (a paragraph opens on its topic, named in words NER may miss: "One
    Woman to Another is a 1927 film directed by ..."), a personal pronoun subject or
    a subject's possessive ("He directed 20 films", "His father was ..."), or the main
    verb of a sentence without a subject (the parser missed it, a fragment after a
    title ending in "?", "Also known for ..."). Each of these adds triple
    recall on 2Wiki's gold triples (docs/results.md).
    """
    aliases = [Mention(title.name, m.type, m.start, m.end, m.root) for m in found
               if m.name != title.name and _refers_to(sentence.doc[m.start:m.end], title)]
    if aliases or any(m.name == title.name for m in found):
        return aliases
    root = sentence.root
    subjects = [t for t in root.children if t.dep_ in SUBJECTS]
    pronouns = [t for t in sentence if (t.dep_ in SUBJECTS and t.lower_ in SUBJECT_PRONOUNS)
                or (t.dep_ == "poss" and t.head.dep_ in SUBJECTS and t.lower_ in POSSESSIVES)]
    at = (subjects[:1] if first else []) or pronouns[:1] or ([] if subjects else [root])
    return [Mention(title.name, "other", t.i, t.i + 1, t.i) for t in at]


def _mention(span: Any, kind: str, possessive_cut: bool = False) -> Mention | None:
    """A span trimmed of leading determiners, possessive pronouns and punctuation (and,
    for a noun chunk, of what precedes a possessive "'s"), or None if nothing is left.
    Named entities keep their "'s": "Boden's Boy" is a film.

    Text converted from tables, lists and PDFs also puts marks at a phrase's edges that
    the tagger takes for words: a table's pipes ("| HOLISQA-BUSINESS |"), a bullet, a
    hyphen left at a line end ("KET-"). So a token of neither letters nor digits set
    apart from the phrase by a space is trimmed too ("C#" and "$5" keep theirs), and so
    are pipes, bullets and dashes at the name's ends. What is left must hold a letter,
    unless it is a date naming a year ("1932", "2019/2020": a life span's end; "-1",
    "30" and NER's "dates" such as "127.0.0.1:1" are no things), and no pipe (a table
    row's cells run together)."""
    tokens = list(span)
    cut = [k for k, t in enumerate(tokens) if t.dep_ == "case"] if possessive_cut else []
    tokens = tokens[cut[-1] + 1:] if cut else tokens
    while tokens and (tokens[0].pos_ in ("DET", "PUNCT") or tokens[0].tag_ == "PRP$"
                      or (_bare(tokens[0]) and tokens[0].whitespace_)):
        tokens = tokens[1:]
    while tokens and (tokens[-1].pos_ == "PUNCT"
                      or (_bare(tokens[-1]) and len(tokens) > 1 and tokens[-2].whitespace_)):
        tokens = tokens[:-1]
    if not tokens:
        return None
    start, end = tokens[0].i, tokens[-1].i + 1
    name = normalise_name("".join(t.text_with_ws for t in tokens if not t.is_quote))
    name = name.strip(STRAY_ENDS).strip()
    if (not name or len(name) > MAX_NAME_CHARS or "|" in name
            or not (any(c.isalpha() for c in name) or (kind == "date" and _YEAR.search(name)))):
        return None
    heads = [t for t in tokens if not start <= t.head.i < end or t.head.i == t.i]
    return Mention(name, kind, start, end, (heads[0] if heads else tokens[-1]).i)


def _bare(token: Any) -> bool:
    """Whether a token has neither a letter nor a digit: punctuation or a symbol."""
    return not any(c.isalnum() for c in token.text)


def _refers_to(span: Any, title: Title) -> bool:
    words = _words(span.text)
    proper = any(t.pos_ == "PROPN" for t in span)
    return proper and bool(words) and (words <= title.words or title.core <= words)


def _is_day(token: Any) -> bool:
    return token.text.isdecimal() and 1 <= int(token.text) <= 31


def _is_year(token: Any) -> bool:
    return token.text.isdecimal() and len(token.text) in (3, 4)


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in normalise_name(text).casefold().replace(",", " ").split()
                     if any(c.isalnum() for c in w))
