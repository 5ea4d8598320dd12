"""GraphRAG local search on a KG skeleton (KET-RAG Alg. 2), shared by ``ket`` and ``hybrid``.

A query picks the entities nearest to it, the relationships around them and the
text units those entities and relationships were extracted from, and renders them
as pipe-delimited tables, as Microsoft GraphRAG's ``LocalSearchMixedContext`` does
(the authors' code uses it with no community reports). The steps, for a budget λ:

1. Seeds: the ``top_entities`` entities by cosine to the question. Entity vectors
   and the question are unit length, so this is the paper's Euclidean order too.
2. Relationships touching a seed, those joining two seeds first, then by strength
   (descending), then by id in natural order (R2 before R10).
3. Entity rows (seed order), then relationship rows, fill λ/2 greedily.
4. Text units rank by the best seed entity that lists their chunk, then by how many
   of the *selected* relationships touching that entity come from the chunk
   (GraphRAG counts all of the entity's relationships; counting the ones in the
   context favours units that back up rows the LLM actually reads), then in the
   entity's own chunk order. They fill the rest of λ (λ minus what the rows used:
   budget the rows leave is not wasted).

Rewiring (Alg. 3, last line): the skeleton links entities to whole chunks. Given a
``parent_of`` map from sub-chunk to chunk, a chunk stands for all of its sub-chunks,
in sub-chunk order, as in the authors' code (not only those that mention the
entity, which would need a second grounding pass the paper does not describe).

Token counts are summed from parts instead of re-tokenising the context (see
``Layout``), so a query costs a few matrix products and dictionary look-ups.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.retrieval.units import Units
from kgrag.store.vectors import VectorTable

ENTITIES_FILE = "entities.parquet"
RELATIONSHIPS_FILE = "relationships.parquet"
ENTITY_TABLE = "entities"
RELATIONSHIP_TABLE = "relationships"  # vectors of "source -- target: description", for users
ENTITY_HEADER = "-----Entities-----\nid|entity|type|description"
RELATIONSHIP_HEADER = "-----Relationships-----\nid|source|target|description|strength"
SOURCES_HEADER = "-----Sources-----"
ROW_JOINER = "\n"
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


def natural_key(text: str) -> tuple[str | int, ...]:
    """Sort key reading digit runs as numbers: ``R2`` < ``R10``, ``c:0/2`` < ``c:0/10``."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", text)))


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

    Re-tokenising a 12,000-token context costs about 30 ms, more than the rest of a
    KET query, so counts are summed from parts counted once: the stored count of each
    row or unit, and the count of each header and separator. The sum is exact for a
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



def children_of(units: Units, parent_of: Mapping[str, str] | None) -> dict[str, list[str]]:
    """Chunk id → its text units in order: the chunk itself when ``parent_of`` (unit id →
    chunk id) is None, else its sub-chunks (the rewiring of KET-RAG Alg. 3)."""
    if parent_of is None:
        return {unit: [unit] for unit in units.text}
    children: dict[str, list[str]] = {}
    for unit in sorted(parent_of, key=natural_key):
        children.setdefault(parent_of[unit], []).append(unit)
    return children


def check_theta(config: dict[str, Any]) -> float:
    theta = config["theta"]
    if not 0.0 <= theta <= 1.0:
        raise KgragError(f"strategy {config['name']!r}: theta must be in [0, 1], got {theta}")
    return theta


@dataclass(frozen=True)
class LocalContext:
    """What local search chose: ids in context order, the sections, and the tokens they
    may take at most (exact for the bundled tokenizer)."""

    entities: list[str]
    relationships: list[str]
    unit_ids: list[str]
    sections: list[Section]
    tokens: int


class LocalSearch:
    """Alg. 2 over one skeleton, everything held in memory (see the module docstring)."""

    def __init__(self, entities: pl.DataFrame, relationships: pl.DataFrame,
                 entity_ids: list[str], entity_matrix: np.ndarray, units: Units,
                 children: dict[str, list[str]], layout: Layout, top_entities: int) -> None:
        self.units, self.children, self.layout = units, children, layout
        self.top_entities = top_entities
        self.entity_ids, self.entity_matrix = entity_ids, entity_matrix
        ids = entities["entity_id"].to_list()
        self.entity_row = dict(zip(ids, entities["row"].to_list()))
        self.entity_tokens = dict(zip(ids, entities["row_tokens"].to_list()))
        self.entity_chunks = dict(zip(ids, entities["chunk_ids"].to_list()))
        by_name = dict(zip(entities["name"].to_list(), ids))
        rel_ids = relationships["relationship_id"].to_list()
        self.relationship_row = dict(zip(rel_ids, relationships["row"].to_list()))
        self.relationship_tokens = dict(zip(rel_ids, relationships["row_tokens"].to_list()))
        self.relationship_chunks = dict(zip(rel_ids, relationships["chunk_ids"].to_list()))
        self.ends: dict[str, tuple[str | None, str | None]] = {}
        self.adjacent: dict[str, list[str]] = {e: [] for e in ids}
        for rel, source, target in zip(rel_ids, relationships["source"].to_list(),
                                       relationships["target"].to_list()):
            self.ends[rel] = (by_name.get(source), by_name.get(target))
            for end in {by_name.get(source), by_name.get(target)} - {None}:
                self.adjacent[end].append(rel)
        # Strength descending, then natural id: the order within both relationship tiers.
        order = sorted(zip(rel_ids, relationships["strength"].to_list()),
                       key=lambda pair: (-pair[1], natural_key(pair[0])))
        self.strength_rank = {rel: rank for rank, (rel, _) in enumerate(order)}

    @classmethod
    def load(cls, folder: Path, units: Units, layout: Layout, *,
             parent_of: Mapping[str, str] | None = None, top_entities: int = 10) -> LocalSearch:
        """Load a skeleton folder; ``units`` are the text units, which are the chunks
        themselves when ``parent_of`` (unit id → chunk id) is None, else sub-chunks."""
        entities = pl.read_parquet(folder / ENTITIES_FILE)
        relationships = pl.read_parquet(folder / RELATIONSHIPS_FILE)
        entity_ids, matrix = VectorTable.open(folder, ENTITY_TABLE).matrix()
        if set(entity_ids) != set(entities["entity_id"].to_list()):
            raise KgragError(f"the entity vectors in {folder} do not match {ENTITIES_FILE}")
        children = children_of(units, parent_of)
        for column in (entities["chunk_ids"], relationships["chunk_ids"]):
            missing = set(column.explode().drop_nulls().to_list()) - children.keys()
            if missing:
                raise KgragError(
                    f"the skeleton in {folder} cites {len(missing)} chunks without text units "
                    f"(e.g. {min(missing)!r}); were the skeleton and the text units built "
                    "from the same chunks?")
        return cls(entities, relationships, entity_ids, matrix, units, children, layout,
                   top_entities)

    def seeds(self, vector: np.ndarray) -> list[str]:
        """The ``top_entities`` entity ids nearest the question, best first."""
        return [self.entity_ids[i] for i in
                best_first(self.entity_matrix @ vector.astype(np.float32), self.top_entities)]

    def search(self, vector: np.ndarray, budget: int,
               exclude: frozenset[str] = frozenset()) -> LocalContext:
        """The local context within ``budget`` tokens; text units in ``exclude`` (already
        in the context through another channel) are not repeated."""
        seeds = self.seeds(vector)
        seed_set = set(seeds)
        half = budget // 2
        entities, used = self.layout.fill(ENTITY_HEADER, ROW_JOINER, seeds, self.entity_row,
                                          self.entity_tokens, half)
        touching = {rel for seed in seeds for rel in self.adjacent[seed]}
        ranked = sorted(touching, key=lambda rel: (not seed_set.issuperset(self.ends[rel]),
                                                   self.strength_rank[rel]))
        relationships, rel_used = self.layout.fill(
            RELATIONSHIP_HEADER, ROW_JOINER, ranked, self.relationship_row,
            self.relationship_tokens, half - used)
        used += rel_used
        sources, source_used = self.layout.fill(
            SOURCES_HEADER, TEXT_JOINER,
            self._ranked_units(seeds, seed_set, relationships.ids, exclude),
            self.units.text, self.units.tokens, budget - used)
        return LocalContext(entities.ids, relationships.ids, sources.ids,
                            [entities, relationships, sources], used + source_used)

    def _ranked_units(self, seeds: list[str], seed_set: set[str], selected: list[str],
                      exclude: frozenset[str]) -> list[str]:
        """Text units by seed rank, then by selected relationships carried (step 4)."""
        carried: Counter[tuple[str, str]] = Counter()
        for rel in selected:
            for end in seed_set.intersection(self.ends[rel]):
                for chunk in self.relationship_chunks[rel]:
                    carried[end, chunk] += 1
        keyed: dict[str, tuple[int, int, int]] = {}
        for rank, seed in enumerate(seeds):
            for chunk in self.entity_chunks[seed]:
                if chunk not in keyed:
                    keyed[chunk] = (rank, -carried[seed, chunk], len(keyed))
        chunks = sorted(keyed, key=keyed.__getitem__)
        return [unit for chunk in chunks for unit in self.children[chunk] if unit not in exclude]
