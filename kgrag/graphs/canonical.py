"""Two-stage entity canonicalisation (HugRAG, App. B.1; notes section 2.1 B).

An LLM names the same thing in several ways across chunks ("J. BIDEN", "JOE
BIDEN", "JOE BIDEN."), and every variant becomes its own node, which splits the
evidence for one entity over several weakly connected nodes. HugRAG merges them in
two stages, with no LLM call: surface matching on the names, then embedding
similarity between the names that are left. Merged entities pool their
descriptions and their supporting chunks; relationships follow their endpoints.

Defaults are the authors' (fuzzy >= 0.92, then cosine >= 0.93). Decisions the paper
leaves open, made here:

* **Stage 1** merges names with the same surface key, a fuzzy ratio at the
  threshold, or unique initials; ``kgrag.graphs.name_pairs`` says which pairs and
  why (the scorer, the initials rule, the identifier guard).
* **Stage 2 embeds the name only.** Two different entities of one type get
  near-identical descriptions from a small extraction model ("a person mentioned
  in the text"), so description embeddings would merge them; the descriptions are
  also noisy and of uneven length. The name is the entity's identity in
  extraction, so it is what is compared. Only the stage-1 canonical names are
  embedded (one ``embed`` call, names sorted), and the vectors are re-normalised,
  so ``embed`` may return raw or unit vectors.
* **Transitivity.** Both stages merge the connected components of their pairs,
  i.e. single linkage: A~B and B~C put A and C in one entity even when A and C are
  below the threshold. That is what a pairwise threshold with merging implies; the
  thresholds are high enough that chains are short. The identifier guard also acts
  per pair, so a chain through a third name could still join two guarded names.
* **Canonical name.** The member with the most evidence: most distinct source
  chunks, then the shortest name, then the alphabetically first. The order is
  total, so the result does not depend on row order, and the stage-2 winner is
  also the best name of the whole final group.
* **Merged rows** follow extraction's merge (``kgrag.graphs.merge``), with the
  members in evidence order (canonical first), so a merged row reads like one
  extraction wrote it. Description parts are trimmed first: the tables may come
  from elsewhere, and "a ; b" should merge with "a; b".
* **Relationships.** Endpoints are renamed; self-loops (also pre-existing ones)
  are dropped; rows over the same unordered pair merge as in extraction, ``strength``
  weighted by each row's number of source chunks (so it stays extraction's mean
  over per-chunk observations). Rows are read in sorted order, so the merged row
  keeps the orientation of its first row in that order. An endpoint that is not an
  entity is kept unchanged.
* **Columns.** Output frames have exactly extraction's schema
  (``ENTITY_FRAME_SCHEMA`` / ``RELATIONSHIP_FRAME_SCHEMA``); extra input columns
  are dropped, and null values read as empty. Entity names must be unique
  (``merge`` guarantees it).

Cost: see ``kgrag.graphs.name_pairs``; the caller's embedding time comes on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from kgrag.errors import KgragError
from kgrag.graphs.merge import (
    DESCRIPTION_SEPARATOR,
    ENTITY_FRAME_SCHEMA,
    RELATIONSHIP_FRAME_SCHEMA,
    Row,
    merge_entities,
    merge_relationships,
)
from kgrag.graphs.name_pairs import cosine_pairs, distinct_identifiers, fuzzy_pairs, initial_pairs
from kgrag.graphs.names import surface_key

Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Canonical:
    """The canonicalised graph and a record of what was merged.

    ``aliases`` maps every merged-away input name to its canonical name (canonical
    names map to nothing). ``fuzzy_merges`` and ``embedding_merges`` count the
    names absorbed by each stage (input entities minus stage-1 entities, stage-1
    entities minus final entities).
    """

    entities: pl.DataFrame
    relationships: pl.DataFrame
    aliases: dict[str, str] = field(default_factory=dict)
    fuzzy_merges: int = 0
    embedding_merges: int = 0


def canonicalise(entities: pl.DataFrame, relationships: pl.DataFrame, embed: Embed, *,
                 fuzzy: float = 0.92, cosine: float = 0.93) -> Canonical:
    """Merge duplicate entities in two stages and rewrite the relationships.

    ``embed`` maps a list of names to one vector per name (raw or unit rows); it is
    called at most once, with the stage-1 canonical names in sorted order, and not
    at all when fewer than two are left. The result does not depend on the row
    order of either frame. See the module docstring for every rule.
    """
    if not 0.0 < fuzzy <= 1.0 or not -1.0 <= cosine <= 1.0:
        raise KgragError(f"canonicalisation thresholds out of range: fuzzy={fuzzy} "
                         f"(needs 0 < fuzzy <= 1), cosine={cosine} (needs -1..1)")
    _require(entities, ENTITY_FRAME_SCHEMA, "entities")
    rows: dict[str, Row] = {}
    for row in entities.select(list(ENTITY_FRAME_SCHEMA)).to_dicts():
        if row["name"] is None or row["name"] in rows:
            raise KgragError(f"entity names must be unique and non-null; got {row['name']!r} "
                             "twice (merge the extractions first)")
        rows[row["name"]] = _tidy(row)
    names = sorted(rows)
    chunks = {n: rows[n]["source_chunk_ids"] for n in names}

    first = _stage_one(names, fuzzy, chunks)
    second = _stage_two(sorted(first), embed, cosine, chunks)

    aliases: dict[str, str] = {}
    groups: dict[str, list[Row]] = {}
    for canonical in sorted(second):
        members = sorted((m for c in second[canonical] for m in first[c]),
                         key=lambda m: _evidence_rank(m, chunks))
        aliases.update({m: canonical for m in members if m != canonical})
        groups[canonical] = [rows[m] for m in members]
    return Canonical(
        entities=merge_entities(groups),
        relationships=_rename_relationships(relationships, aliases),
        aliases=aliases,
        fuzzy_merges=len(names) - len(first),
        embedding_merges=len(first) - len(second),
    )


def _rename_relationships(relationships: pl.DataFrame,
                         aliases: dict[str, str]) -> pl.DataFrame:
    """Rename endpoints through ``aliases``, then merge (self-loops dropped, unordered
    pairs merged) with rows read in a sorted order, so row order does not matter."""
    _require(relationships, RELATIONSHIP_FRAME_SCHEMA, "relationships")
    ordered = sorted(relationships.select(list(RELATIONSHIP_FRAME_SCHEMA)).to_dicts(),
                     key=_relationship_sort_key)
    return merge_relationships(
        _tidy({**row, "source": aliases.get(row["source"], row["source"]),
               "target": aliases.get(row["target"], row["target"])}) for row in ordered)


def _stage_one(names: list[str], fuzzy: float,
               chunks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Surface canonicalisation: same key, fuzzy ratio, or unique initials."""
    keys_of = {n: surface_key(n) for n in names}
    keys = sorted(set(keys_of.values()))
    index = {k: i for i, k in enumerate(keys)}
    key_pairs = [(i, j) for i, j in fuzzy_pairs(keys, fuzzy)
                 if not distinct_identifiers(keys[i], keys[j])]
    key_pairs += initial_pairs(keys)
    component = _components(len(keys), key_pairs)
    return _ranked(names, [component[index[keys_of[n]]] for n in names], chunks)


def _stage_two(canon: list[str], embed: Embed, cosine: float,
               chunks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Embedding canonicalisation over the stage-1 names (name text only)."""
    if len(canon) < 2:
        return {n: [n] for n in canon}
    vectors = np.asarray(embed(list(canon)))
    if vectors.ndim != 2 or vectors.shape[0] != len(canon):
        raise KgragError(f"embed returned shape {vectors.shape} for {len(canon)} names; "
                         f"expected ({len(canon)}, dim)")
    keys = [surface_key(n) for n in canon]
    pairs = [(i, j) for i, j in cosine_pairs(vectors, cosine)
             if not distinct_identifiers(keys[i], keys[j])]
    return _ranked(canon, _components(len(canon), pairs), chunks)


def _components(n: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """The connected component of each of the items 0..n-1 joined by ``pairs``."""
    import scipy.sparse as sp  # imported where a sparse matrix is made, not by every command
    from scipy.sparse.csgraph import connected_components

    ends = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    graph = sp.csr_matrix((np.ones(len(ends)), (ends[:, 0], ends[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _ranked(names: Sequence[str], components: Iterable[int],
            chunks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Canonical name -> members (best first) of each component, components in the
    order of their first name."""
    groups: dict[int, list[str]] = {}
    for name, component in zip(names, components):
        groups.setdefault(int(component), []).append(name)
    ranked = (sorted(members, key=lambda m: _evidence_rank(m, chunks))
              for members in groups.values())
    return {members[0]: members for members in ranked}


def _evidence_rank(name: str, chunks: dict[str, list[str]]) -> tuple[int, int, str]:
    """Sort key: most distinct source chunks, then shortest, then alphabetical."""
    return (-len(set(chunks[name])), len(name), name)


def _tidy(row: Row) -> Row:
    """A row with nulls read as empty and each description part trimmed."""
    parts = (row["description"] or "").split(DESCRIPTION_SEPARATOR)
    tidy = {**row, "description": DESCRIPTION_SEPARATOR.join(p.strip() for p in parts),
            "source_chunk_ids": list(row["source_chunk_ids"] or [])}
    if "strength" in row:
        tidy |= {"strength": row["strength"] or 0.0, "weight": row["weight"] or 0}
    return tidy


def _relationship_sort_key(row: Row) -> tuple:
    return (row["source"], row["target"], row["description"] or "", row["strength"] or 0.0,
            row["weight"] or 0, tuple(row["source_chunk_ids"] or ()), bool(row["grounded"]))


def _require(frame: pl.DataFrame, schema: dict[str, pl.DataType], what: str) -> None:
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise KgragError(f"the {what} table lacks column(s) {', '.join(missing)}")
