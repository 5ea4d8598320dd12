"""How much of a corpus' gold facts an extraction recovers (2Wiki's ``evidences``).

A gold triple (subject, relation, object) counts only where the build could have
found it: in the chunks it extracted whose text (title line included) mentions
both the subject and the object. Those are the triple's *evidence chunks*; a triple
with none is out of scope (another chunk selection, a β < 1 skeleton, or a fact the
text does not state). Over the triples in scope:

* entity recall: subject and object are both entities of one evidence chunk;
* triple recall: a relationship of an evidence chunk joins them, either direction;
* relation match: such a relationship's description (label and sentence on the
  ``nlp`` path, the model's words on the ``llm`` path) holds a word that starts
  with one of the relation's cue stems (``RELATION_CUES``: "direct" for
  *director*, "born"/"birth" for *date of birth*; other relations use their own
  words). A soft, lexical match: it says the relationship names the relation, not
  that it is correct.

Names match when they share an alias. ``aliases`` normalises a name (``match_form``:
accents dropped, case folded, punctuation as spaces: "Pál Gábor" and "PAL GABOR" agree) and
adds its forms without a disambiguating parenthesis ("The Zone (2017 film)"), before
a qualifying comma ("Thomas Stanley, 1st Earl of Derby", "Montreal, Quebec"; not
"July 23, 1968"), without a leading article, and as first and last word of three or
more without digits ("Shawn Adam Levy" is "Shawn Levy"; a date is not). A text mentions a name when one of
its aliases occurs in the normalised text as whole words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import polars as pl

from kgrag.graphs.names import match_form

RELATION_CUES: dict[str, tuple[str, ...]] = {
    "director": ("direct",),
    "date of birth": ("born", "birth"),
    "place of birth": ("born", "birth", "native"),
    "date of death": ("died", "death", "dead"),
    "place of death": ("died", "death", "dead"),
    "publication date": ("release", "publish", "publication", "premiere", "aired"),
    "country of citizenship": ("citizen", "national"),
    "country of origin": ("origin",),
    "father": ("father", "son", "daughter", "child"),
    "mother": ("mother", "son", "daughter", "child"),
    "child": ("child", "son", "daughter", "father", "mother"),
    "spouse": ("married", "marry", "marri", "wife", "husband", "spouse", "consort"),
    "performer": ("perform", "record", "sing", "sung", "sang"),
    "composer": ("compos", "wrote", "written"),
    "producer": ("produc",),
    "inception": ("found", "establish", "launch", "start"),
    "educated at": ("educat", "studi", "study", "graduat", "attend", "alumn"),
    "employer": ("work", "employ"),
    "award received": ("award", "won", "win", "receiv"),
    "publisher": ("publish",),
    "has part": ("member", "part"),
}
_FUNCTION_WORDS = frozenset({"of", "at", "the", "a", "an", "date", "place", "received"})
_PARENTHESIS = re.compile(r"\s*\([^)]*\)")
_ARTICLE = re.compile(r"^(the|a|an) ")


def aliases(name: str) -> frozenset[str]:
    """The normalised forms a name is recognised by (see the module docstring)."""
    forms = {name, _PARENTHESIS.sub("", name)}
    heads = {head for head, comma, rest in (form.partition(",") for form in forms)
             if comma and rest.strip() and not rest.strip().isdigit()}
    normalised = {match_form(form) for form in forms | heads}
    normalised |= {_ARTICLE.sub("", form) for form in normalised}
    normalised |= {f"{words[0]} {words[-1]}" for words in map(str.split, normalised)
                   if len(words) >= 3 and not any(c.isdigit() for c in "".join(words))}
    return frozenset(form for form in normalised if form)


Triple = tuple[str, str, str]


def evidence_chunks(triples: pl.DataFrame, units: Mapping[str, str]) -> dict[Triple, set[str]]:
    """Each distinct (subject, relation, object) → the units whose text mentions both
    subject and object (a triple several questions share is one key)."""
    padded = {chunk: f" {match_form(text)} " for chunk, text in units.items()}
    unique = triples.select("subject", "relation", "object").unique(maintain_order=True)
    evidence = {}
    for subject, relation, obj in unique.iter_rows():
        s_names, o_names = aliases(subject), aliases(obj)
        evidence[(subject, relation, obj)] = {
            chunk for chunk, text in padded.items()
            if _mentioned(text, s_names) and _mentioned(text, o_names)}
    return evidence


def _mentioned(padded_text: str, names: frozenset[str]) -> bool:
    return any(f" {alias} " in padded_text for alias in names)


def relation_matches(relation: str, description: str) -> bool:
    """Whether a description holds a word starting with one of the relation's cue stems."""
    cues = RELATION_CUES.get(relation.strip().lower()) or tuple(
        word[:5] for word in match_form(relation).split() if word not in _FUNCTION_WORDS)
    return any(word.startswith(cues) for word in match_form(description).split())


@dataclass(frozen=True)
class GoldScores:
    """Gold-triple recall of one extraction; recalls are None when no triple is in scope."""

    gold_triples: int
    in_scope: int
    entity_recall: float | None
    triple_recall: float | None
    relation_match: float | None

    def as_row(self) -> dict[str, int | float | None]:
        return {"gold_triples": self.gold_triples, "gold_in_scope": self.in_scope,
                "entity_recall": self.entity_recall, "triple_recall": self.triple_recall,
                "relation_match": self.relation_match}


def gold_scores(triples: pl.DataFrame, units: Mapping[str, str], entities: pl.DataFrame,
                relationships: pl.DataFrame) -> GoldScores:
    """Score merged extraction tables against gold triples.

    ``triples`` has columns subject, relation, object (a triple several questions
    share counts once); ``units`` maps every chunk the build extracted to the text it
    extracted from; ``entities`` and ``relationships`` are ``merge``'s tables.
    """
    evidence_of = evidence_chunks(triples, units)
    entity_chunks = _index(entities["name"], entities["source_chunk_ids"])
    by_source = _rows_by_alias(relationships["source"])
    by_target = _rows_by_alias(relationships["target"])
    rel_chunks = [set(ids) for ids in relationships["source_chunk_ids"].to_list()]
    descriptions = relationships["description"].to_list()
    in_scope = found_entities = found_triples = matched = 0
    for (subject, relation, obj), evidence in evidence_of.items():
        if not evidence:
            continue
        s_names, o_names = aliases(subject), aliases(obj)
        in_scope += 1
        found_entities += bool(evidence & _chunks_of(entity_chunks, s_names)
                               & _chunks_of(entity_chunks, o_names))
        rows = (_rows_of(by_source, s_names) & _rows_of(by_target, o_names)) | (
            _rows_of(by_source, o_names) & _rows_of(by_target, s_names))
        joined = [r for r in sorted(rows) if rel_chunks[r] & evidence]
        found_triples += bool(joined)
        matched += any(relation_matches(relation, descriptions[r]) for r in joined)

    def share(count: int) -> float | None:
        return round(count / in_scope, 4) if in_scope else None

    return GoldScores(len(evidence_of), in_scope, share(found_entities), share(found_triples),
                      share(matched))


def _index(names: pl.Series, chunk_ids: pl.Series) -> dict[str, set[str]]:
    """Alias → the chunks of every entity known by it."""
    index: dict[str, set[str]] = {}
    for name, chunks in zip(names.to_list(), chunk_ids.to_list()):
        for alias in aliases(name):
            index.setdefault(alias, set()).update(chunks)
    return index


def _rows_by_alias(names: pl.Series) -> dict[str, set[int]]:
    index: dict[str, set[int]] = {}
    for row, name in enumerate(names.to_list()):
        for alias in aliases(name):
            index.setdefault(alias, set()).add(row)
    return index


def _chunks_of(index: Mapping[str, set[str]], names: Iterable[str]) -> set[str]:
    return set().union(*(index.get(alias, set()) for alias in names))


def _rows_of(index: Mapping[str, set[int]], names: Iterable[str]) -> set[int]:
    return set().union(*(index.get(alias, set()) for alias in names))
