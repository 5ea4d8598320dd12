"""The entity–chunk graph a personalised-PageRank walk runs on, and how a question's
words find its entities.

Built when a strategy loads, from the entity and relationship tables of any build,
whatever extraction made them: a skeleton's or an ``entities`` build's extraction
step, a hierarchy's canonical entities. A skeleton is read at its extraction, so the
walk neither waits for nor depends on the skeleton's entity and relationship vectors.
The graph has:

* a node per entity and per chunk;
* an edge between an entity and every chunk it was extracted from, of weight 1 / (the
  chunks the entity is linked to) with ``specific_steps`` (the default), else 1: a step
  from a chunk then favours its rare entities over hub concepts such as "FILM" that
  would leak the walk's mass across the corpus (docs/methods/ppr.md),
  while a step from an entity still spreads evenly over its chunks;
* an edge of weight strength / 10 between the two entities of a relationship;
* with ``titles``, each chunk's title as one more entity (merged with an extracted
  entity of the same normalised name), linked to the chunk: encyclopedic passages
  are about their title, and questions name it.

Two shapes narrow it (both off by default). ``phrases="named"`` keeps only the phrases
a passage is about rather than everything it says: named entities other than dates
and numbers, and noun chunks that are proper names or hold one (``named_phrases``);
generic noun chunks ("the film", "his wife") connect unrelated passages and spread
the walk's mass. ``relations=False`` drops the entity–entity edges, leaving the
phrase–passage graph of the plain HippoRAG-style reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from kgrag.graphs.names import normalise_name

if TYPE_CHECKING:
    import scipy.sparse as sp

MAX_STRENGTH = 10.0  # relationship strengths are on the extraction's 1–10 scale


@cache
def _stopwords() -> frozenset[str]:
    """bm25s's English stop words, imported on first use: bm25s imports scipy, which
    commands that build or search no graph need not pay for."""
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def words(text: str) -> tuple[str, ...]:
    """The matching form of a name or question: case-folded word characters only, so
    "J.R.R. Tolkien's" contains "J. R. R. Tolkien"."""
    return tuple(re.findall(r"\w+", text.casefold()))


def title_aliases(title: str) -> list[str]:
    """A title and, for "Forbidden Ground (2013 film)", its name without the parenthesis."""
    plain = title.split(" (", 1)[0] if title.endswith(")") else title
    return [title] if plain == title else [title, plain]


NUMERIC_NAME = re.compile(r"\d")
NAMED_TYPES = frozenset({"person", "organization", "geo", "event", "work", "biomedical"})


def named_phrases(entities: pl.DataFrame) -> list[bool]:
    """Per entity row, whether it is a named phrase: a named entity of a named type; an
    untyped one ("other": nationalities, products, titles) without digits (amounts,
    percentages); or a noun chunk ("concept") one of whose words is capitalised where
    its describing sentence uses it, past that sentence's first word: a proper name
    ("Angi Vera") or a phrase holding one ("the Fox film"). Dates and plain noun
    chunks are not."""
    kept = []
    for name, kind, described in entities.select("name", "type", "description").iter_rows():
        if kind in NAMED_TYPES:
            kept.append(True)
        elif kind == "other":
            kept.append(not NUMERIC_NAME.search(name))
        elif kind == "concept":
            kept.append(_capitalised(name, described or ""))
        else:
            kept.append(False)
    return kept


def _capitalised(name: str, sentence: str) -> bool:
    """Whether a word of ``name`` (not a stop word) is capitalised in ``sentence``
    somewhere other than at its start."""
    wanted = {w for w in words(name) if w not in _stopwords()}
    return any(match.group().casefold() in wanted and match.group()[0].isupper()
               for match in re.finditer(r"\w+", sentence) if match.start() > 0)


@dataclass(frozen=True)
class EntityGraph:
    """Entity and chunk nodes (entities first) and their symmetric weighted edges."""

    names: list[str]  # normalised entity names, node i for i < len(names)
    chunk_ids: list[str]  # node len(names) + j
    adjacency: sp.csr_matrix
    mentions: np.ndarray  # per entity, the chunks it is linked to (its specificity's inverse)
    keys: dict[tuple[str, ...], int]  # matching form of a name or alias → entity node
    longest: int  # words in the longest key: how far a match can reach

    @classmethod
    def build(cls, entities: pl.DataFrame, relationships: pl.DataFrame, chunk_ids: list[str],
              titles: dict[str, str] | None, specific_steps: bool = True,
              phrases: str = "all", relations: bool = True) -> EntityGraph:
        """The graph of one build's tables; ``titles`` (chunk id → title) adds title
        entities; ``specific_steps`` weights each entity–chunk edge by the entity's
        specificity; ``phrases`` ("all" or "named") and ``relations`` choose the shape
        (module docstring). Chunk ids the build names but ``chunk_ids`` lacks are
        ignored."""
        if phrases == "named":
            entities = entities.filter(pl.Series(named_phrases(entities)))
        if not relations:
            relationships = relationships.clear()
        import scipy.sparse as sp  # imported where a graph is built, not by every command

        chunks = {c: j for j, c in enumerate(chunk_ids)}
        index: dict[str, int] = {}
        aliases: dict[str, list[str]] = {}
        pairs: list[tuple[int, int]] = []
        for name, mentioned in zip(entities["name"].to_list(),
                                   entities["source_chunk_ids"].to_list()):
            normal = normalise_name(name)
            node = index.setdefault(normal, len(index))
            aliases.setdefault(normal, [name])
            pairs += [(node, chunks[c]) for c in mentioned if c in chunks]
        for chunk, title in (titles or {}).items():
            if chunk in chunks and title:
                name = normalise_name(title)
                node = index.setdefault(name, len(index))
                aliases.setdefault(name, []).extend(title_aliases(title))
                pairs.append((node, chunks[chunk]))
        n_entities = len(index)
        links = sorted(set(pairs))
        rows = [e for e, _ in links]
        cols = [n_entities + c for _, c in links]
        mentions = np.bincount(np.array(rows, dtype=np.int64), minlength=n_entities)
        weights = (list(1.0 / mentions[rows]) if specific_steps else [1.0] * len(links))
        for source, target, strength in relationships.select(
                "source", "target", "strength").iter_rows():
            a, b = index.get(normalise_name(source)), index.get(normalise_name(target))
            if a is not None and b is not None and a != b:
                rows.append(a)
                cols.append(b)
                weights.append(float(strength) / MAX_STRENGTH)
        size = n_entities + len(chunk_ids)
        upper = sp.coo_matrix((weights, (rows, cols)), shape=(size, size)).tocsr()
        adjacency = (upper + upper.T).tocsr()  # a relationship seen twice adds its weights
        keys: dict[tuple[str, ...], int] = {}
        for name, node in index.items():
            for alias in [name, *aliases.get(name, [])]:
                key = words(alias)
                if key and not set(key) <= _stopwords():
                    keys.setdefault(key, node)
        return cls(list(index), chunk_ids, adjacency, mentions, keys,
                   max((len(k) for k in keys), default=0))

    def link(self, question: str) -> list[int]:
        """Entity nodes the question names (see the module docstring), in question order."""
        tokens = words(question)
        spans = [(start, end) for start in range(len(tokens))
                 for end in range(start + 1, min(len(tokens), start + self.longest) + 1)
                 if tokens[start:end] in self.keys]
        kept = [(s, e) for s, e in spans
                if not any(o <= s and e <= f and (o, f) != (s, e) for o, f in spans)]
        return list(dict.fromkeys(self.keys[tokens[s:e]] for s, e in kept))

    def specificity(self, nodes: list[int]) -> np.ndarray:
        return 1.0 / np.maximum(self.mentions[nodes], 1)


    def named(self, name: str) -> int | None:
        """The entity node a name (a mention, a canonical entity) matches word for word."""
        key = words(name)
        return self.keys.get(key) if key else None

    def with_synonyms(self, pairs: list[tuple[int, int, float]]) -> EntityGraph:
        """This graph plus an edge of weight ``cosine`` for every (entity, entity,
        cosine) pair: HippoRAG's synonym edges, so that mass reaches "TOLKIEN" from
        "J. R. R. TOLKIEN" though no chunk names both."""
        import scipy.sparse as sp

        if not pairs:
            return self
        rows, cols, weights = (list(column) for column in zip(*pairs))
        extra = sp.coo_matrix((weights, (rows, cols)), shape=self.adjacency.shape).tocsr()
        return replace(self, adjacency=(self.adjacency + extra + extra.T).tocsr())
