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
``kgrag.retrieval.layout``), so a query costs a few matrix products and dictionary look-ups.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from kgrag.contents.entities import (
    ENTITIES_FILE,
    open_entity_vectors,
    read_entities,
    read_relationships,
)
from kgrag.errors import KgragError
from kgrag.retrieval.layout import SOURCES_HEADER, TEXT_JOINER, Layout, Section, best_first
from kgrag.retrieval.units import Units

ENTITY_HEADER = "-----Entities-----\nid|entity|type|description"
RELATIONSHIP_HEADER = "-----Relationships-----\nid|source|target|description|strength"
ROW_JOINER = "\n"


def natural_key(text: str) -> tuple[str | int, ...]:
    """Sort key reading digit runs as numbers: ``R2`` < ``R10``, ``c:0/2`` < ``c:0/10``."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", text)))


def children_of(units: Units, parent_of: Mapping[str, str] | None) -> dict[str, list[str]]:
    """Chunk id → its text units in order: the chunk itself when ``parent_of`` (unit id →
    chunk id) is None, else its sub-chunks (the rewiring of KET-RAG Alg. 3)."""
    if parent_of is None:
        return {unit: [unit] for unit in units.text}
    children: dict[str, list[str]] = {}
    for unit in sorted(parent_of, key=natural_key):
        children.setdefault(parent_of[unit], []).append(unit)
    return children




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
            for end in {e for e in (by_name.get(source), by_name.get(target)) if e is not None}:
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
        entities, relationships = read_entities(folder), read_relationships(folder)
        entity_ids, matrix = open_entity_vectors(folder).matrix()
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
