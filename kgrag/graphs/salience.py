"""Salient entities and sparse relationships: an LLM-free graph at HugRAG's granularity.

Why: the paper's HolisQA graphs have about 1,700–2,200 nodes per domain and about as
many edges (near-forests; notes, Table 5), because an LLM extractor keeps only the
entities a passage is about. The ``nlp`` extraction keeps every named-entity span and
noun chunk, many times as many nodes and dozens of relationships per chunk, so a
hierarchy over it is mostly one-chunk phrases and generic hubs, and a budgeted
expansion spends its tokens on their rows. Two rules, both applied after
canonicalisation (merged names pool their chunks), bring the graph to the paper's size:

* **Salience.** An entity is a node when it recurs: it is mentioned in at least
  ``min_chunks`` chunks. Named-entity spans and noun-chunk key phrases are judged alike,
  by recurrence; a phrase in more than ``max_share`` of all chunks ("study", "results")
  is generic, not salient, and would make a hub that joins unrelated articles.
* **Sparse relationships.** Among salient entities, a relationship is kept when it is
  one of the ``per_entity`` strongest of either endpoint (by ``weight``, the strength
  summed over the chunks that state it; ties: the earlier row), so edges stay within
  ``per_entity`` times the nodes, as in the paper's near-forests.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from kgrag.errors import KgragError


@dataclass(frozen=True)
class Salience:
    """The rule's settings (see the module docstring)."""

    min_chunks: int
    max_share: float
    per_entity: int


def salient_graph(entities: pl.DataFrame, relationships: pl.DataFrame, rule: Salience,
                  chunks_total: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The salient entities and the sparse relationships among them.

    ``entities`` has ``name`` and ``source_chunk_ids``; ``relationships`` has ``source``,
    ``target`` and ``weight``. Fewer than two salient entities is an error: no graph,
    modules or gates can be built from one node.
    """
    most = rule.max_share * chunks_total
    mentions = entities["source_chunk_ids"].list.len()
    kept = entities.filter((mentions >= rule.min_chunks) & (mentions <= most))
    if kept.height < 2:
        raise KgragError(
            f"the salience rule keeps {kept.height} of {entities.height} entities (mentioned "
            f"in at least {rule.min_chunks} and at most {rule.max_share:g} of the "
            f"{chunks_total} chunks); a hierarchy needs at least two: lower "
            "salient_min_chunks or raise salient_max_share")
    names = kept["name"].implode()
    among = relationships.filter(pl.col("source").is_in(names) & pl.col("target").is_in(names))
    return kept, _strongest(among, rule.per_entity)


def _strongest(relationships: pl.DataFrame, per_entity: int) -> pl.DataFrame:
    """Relationships among the ``per_entity`` strongest of either endpoint, in input order."""
    rows = relationships.with_row_index("_row")
    ends = pl.concat([rows.select("_row", "weight", entity=pl.col(end))
                      for end in ("source", "target")])
    ranked = ends.sort(["weight", "_row"], descending=[True, False]).with_columns(
        rank=pl.col("_row").cum_count().over("entity"))
    chosen = ranked.filter(pl.col("rank") <= per_entity)["_row"].unique()
    return rows.filter(pl.col("_row").is_in(chosen.implode())).drop("_row")
