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
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from kgrag.graphs.names import normalise_name

if TYPE_CHECKING:
    import scipy.sparse as sp

MAX_STRENGTH = 10.0  # relationship strengths are on the extraction's 1–10 scale
RELATION_ROWS = 250_000  # relationships mapped to their entity nodes at a time


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
    # matching form of a name or alias, its words joined by a space (one string: a tuple of
    # word strings cost three times as much) → entity node
    keys: dict[str, int]
    longest: int  # words in the longest key: how far a match can reach

    @classmethod
    def build(cls, entities: Iterable[pl.DataFrame], relationships: Iterable[pl.DataFrame],
              chunk_ids: list[str], titles: dict[str, str] | None,
              specific_steps: bool = True, phrases: str = "all",
              relations: bool = True) -> EntityGraph:
        """The graph of one build's tables, read a part at a time: its entities (``name``,
        ``source_chunk_ids``; ``entity_parts``: held whole with their chunk ids, 306 MB at
        110,056 chunks, the load's largest part) and its relationships (``source``,
        ``target``, ``strength``; ``relationship_parts``: 131 MB whole); ``titles`` (chunk
        id → title) adds title entities; ``specific_steps`` weights each entity–chunk edge
        by the entity's specificity; ``phrases`` ("all" or "named") and ``relations``
        choose the shape (module docstring). Chunk ids the build names but ``chunk_ids``
        lacks are ignored."""
        import scipy.sparse as sp  # imported where a graph is built, not by every command

        index: dict[str, int] = {}
        aliases: dict[str, list[str]] = {}
        nodes, positions = _entity_links(entities, phrases, chunk_ids, index, aliases)
        # a chunk's position by its id, for its title's entity: built only where there
        # are titles (a million chunks make it about 100 MB)
        chunks = {c: j for j, c in enumerate(chunk_ids)} if titles else {}
        for chunk, title in (titles or {}).items():
            if chunk in chunks and title:
                name = normalise_name(title)
                nodes.append(np.array([index.setdefault(name, len(index))]))
                positions.append(np.array([chunks[chunk]]))
                aliases.setdefault(name, []).extend(title_aliases(title))
        n_entities, n_chunks = len(index), max(len(chunk_ids), 1)
        # each (entity, chunk) link once, in (entity, chunk) order, as numbers: a Python
        # tuple a link and a list entry a relationship end left 412 MB resident at 110,056
        # chunks, for a graph of about 125 MB (docs/scale.md)
        links = np.unique(np.concatenate(nodes) * n_chunks + np.concatenate(positions))
        rows, cols = links // n_chunks, n_entities + links % n_chunks
        mentions = np.bincount(rows, minlength=n_entities)
        weights = 1.0 / mentions[rows] if specific_steps else np.ones(len(links))
        a, b, strength = _relation_ends(relationships if relations else [], index)
        size = n_entities + len(chunk_ids)
        upper = sp.coo_matrix((np.concatenate([weights, strength / MAX_STRENGTH]),
                               (np.concatenate([rows, a]), np.concatenate([cols, b]))),
                              shape=(size, size)).tocsr()
        adjacency = (upper + upper.T).tocsr()  # a relationship seen twice adds its weights
        keys: dict[str, int] = {}
        longest = 0
        for name, node in index.items():
            for alias in [name, *aliases.get(name, [])]:
                key = words(alias)
                if key and not set(key) <= _stopwords():
                    keys.setdefault(" ".join(key), node)
                    longest = max(longest, len(key))
        return cls(list(index), chunk_ids, adjacency, mentions, keys, longest)

    def link(self, question: str) -> list[int]:
        """Entity nodes the question names (see the module docstring), in question order."""
        tokens = words(question)
        spans = [(start, end) for start in range(len(tokens))
                 for end in range(start + 1, min(len(tokens), start + self.longest) + 1)
                 if " ".join(tokens[start:end]) in self.keys]
        kept = [(s, e) for s, e in spans
                if not any(o <= s and e <= f and (o, f) != (s, e) for o, f in spans)]
        return list(dict.fromkeys(self.keys[" ".join(tokens[s:e])] for s, e in kept))

    def specificity(self, nodes: list[int]) -> np.ndarray:
        return 1.0 / np.maximum(self.mentions[nodes], 1)


    def named(self, name: str) -> int | None:
        """The entity node a name (a mention, a canonical entity) matches word for word."""
        key = words(name)
        return self.keys.get(" ".join(key)) if key else None

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


def _entity_links(parts: Iterable[pl.DataFrame], phrases: str, chunk_ids: list[str],
                  index: dict[str, int], aliases: dict[str, list[str]]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The (entity node, chunk position) of each entity–chunk link, a part of the entity
    table at a time, as arrays; each part's names are added to ``index`` (normalised name
    → node) and ``aliases`` (normalised name → its names). Chunk ids ``chunk_ids`` lacks
    are left out."""
    rows = pl.DataFrame({"source_chunk_ids": chunk_ids, "position": range(len(chunk_ids))},
                        schema={"source_chunk_ids": pl.String, "position": pl.Int64})
    nodes, positions = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for part in parts:
        if phrases == "named":
            part = part.filter(pl.Series(named_phrases(part), dtype=pl.Boolean))
        row_node = np.empty(part.height, dtype=np.int64)
        for row, name in enumerate(part["name"].to_list()):
            normal = normalise_name(name)
            row_node[row] = index.setdefault(normal, len(index))
            aliases.setdefault(normal, [name])
        mentioned = (part.select("source_chunk_ids").with_row_index("row")
                     .explode("source_chunk_ids").join(rows, on="source_chunk_ids"))
        nodes.append(row_node[mentioned["row"].to_numpy()])
        positions.append(mentioned["position"].to_numpy())
    return nodes, positions


def _relation_ends(parts: Iterable[pl.DataFrame], index: dict[str, int]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entity nodes at either end of each relationship whose ends are two different
    entities of ``index`` (normalised name → node), and its strength, in table order,
    a part at a time (``RELATION_ROWS`` rows where read from the table), each distinct
    name of a part normalised once: every distinct name of the table at once held 250
    MB more at 2.4M relationships, a part at a time 60 MB."""
    a, b, strength = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for part in parts:
        names = pl.concat([part["source"], part["target"]]).unique()
        nodes = pl.Series([index.get(normalise_name(name), -1) for name in names.to_list()],
                          dtype=pl.Int64)
        source, target = (part[end].replace_strict(names, nodes).to_numpy()
                          for end in ("source", "target"))
        kept = (source >= 0) & (target >= 0) & (source != target)
        a.append(source[kept])
        b.append(target[kept])
        strength.append(part["strength"].cast(pl.Float64).to_numpy()[kept])
    return np.concatenate(a), np.concatenate(b), np.concatenate(strength)
