"""Graph elements: the entities and relationships an extractor finds in one chunk.

The ``llm``, ``nlp`` and ``hybrid`` extractors all yield one ``Extraction`` per
chunk, so ``kgrag.graphs.merge`` builds the same entity and relationship tables
from any of them, and ``counts_frame`` measures them alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields

import polars as pl


@dataclass(frozen=True)
class Entity:
    """One entity of one chunk; ``name`` is normalised (``kgrag.graphs.names``)."""

    name: str
    type: str
    description: str
    grounded: bool


@dataclass(frozen=True)
class Relationship:
    """One undirected relationship of one chunk between two of its entities."""

    source: str
    target: str
    description: str
    strength: int
    grounded: bool


@dataclass(frozen=True)
class ExtractionCounts:
    """What each filter removed or added, per chunk, so quality can be measured.

    ``*_raw`` are the model's items as emitted; ``*_empty`` / ``relationships_invalid``
    lost a name or were self-loops; ``*_duplicate`` repeated a kept item;
    ``entities_implied`` were added as relationship endpoints; ``*_ungrounded`` failed
    grounding (counted whether or not they were kept).
    """

    entities_raw: int = 0
    relationships_raw: int = 0
    entities_empty: int = 0
    relationships_invalid: int = 0
    entities_duplicate: int = 0
    relationships_duplicate: int = 0
    entities_implied: int = 0
    entities_ungrounded: int = 0
    relationships_ungrounded: int = 0


@dataclass(frozen=True)
class Extraction:
    """The result for one chunk. A failed extraction carries ``error`` and no items,
    so a build goes on and its manifest can list the chunk as failed."""

    chunk_id: str
    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    attempts: int
    counts: ExtractionCounts = field(default_factory=ExtractionCounts)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def counts_frame(extractions: Iterable[Extraction]) -> pl.DataFrame:
    """One row per chunk: attempts, error, items kept and every filter's counts, so that
    extraction quality can be measured after the fact (``kgrag.eval.builds``)."""
    return pl.DataFrame(
        [{"chunk_id": x.chunk_id, "attempts": x.attempts, "error": x.error,
          "entities": len(x.entities), "relationships": len(x.relationships),
          **asdict(x.counts)} for x in extractions],
        schema={"chunk_id": pl.String, "attempts": pl.Int64, "error": pl.String,
                "entities": pl.Int64, "relationships": pl.Int64,
                **{f.name: pl.Int64 for f in dataclass_fields(ExtractionCounts)}})

