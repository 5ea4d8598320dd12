"""RAS's text-to-triples and per-query graph (Jiang et al., Eq. 4–6, §2.2 of the notes).

Text-to-triples runs the spec's shared extraction (``extraction.method``) on each
retrieved passage instead of the paper's fine-tuned t2t model, cached like every
extraction, and each relationship that states a predicate becomes the triple (source,
predicate, target) as the method says (``ExtractionMethod.triples`` in
``kgrag.graphs.extraction.methods``: with ``nlp`` the dependency-path label, and an
unlabelled co-occurrence edge gives no triple; with ``llm`` the description; with
``hybrid`` the LLM's relation words, else the nlp label). Names are the extraction's
normalised (upper-case) names, shown in the passage's own casing when it contains them.

A triple renders as RAS's text says (``kgrag.training.ras_text.render``). A passage
with no triple adds nothing to the graph and is counted in the trace.

The per-query graph keeps, per sub-query, the triples it added (a triple already in
the graph is not added again): the Graph-LLM encodes each sub-query's subgraph apart
and mean-pools them (App. C.2), and the history shows each sub-query's triples. Its
nodes are the unique subject and object strings (exact match: no entity resolution).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgrag.graphs.extraction.methods import Inline, method_of
from kgrag.graphs.extraction.nlp import Chunk
from kgrag.training.ras_text import Triple


def passage(unit_id: str, unit: str) -> Chunk:
    """What the extractor reads of a retrieval unit: the text, and the title when the
    unit shows one (``# <title>`` first line)."""
    if unit.startswith("# ") and "\n" in unit:
        title, text = unit[2:].split("\n", 1)
        return Chunk(unit_id, text, title)
    return Chunk(unit_id, unit, None)


TextToTriples = Callable[[list[Chunk]], list[list[Triple]]]


def text_to_triples(extraction: dict[str, Any], models: Any) -> TextToTriples:
    """The spec's extraction method as a passages → triples function (``extraction`` is
    the ``extract`` config the retrieve step's fingerprint holds)."""
    method = method_of(extraction)
    run = Inline(models)

    def to_triples(chunks: list[Chunk]) -> list[list[Triple]]:
        found = method.extract(chunks, extraction, run)
        return [method.triples(x, chunk) for x, chunk in zip(found, chunks)]

    return to_triples


@dataclass
class QueryGraph:
    """The per-query graph G_Q: each sub-query's new triples (its subgraph g_i)."""

    subgraphs: list[list[Triple]] = field(default_factory=list)
    seen: set[Triple] = field(default_factory=set)

    def merge(self, triples: Sequence[Triple]) -> list[Triple]:
        """Add one sub-query's triples; returns those new to the graph (its subgraph)."""
        new = [t for t in dict.fromkeys(triples) if t not in self.seen]
        self.seen.update(new)
        self.subgraphs.append(new)
        return new

    @property
    def nodes(self) -> int:
        return len({n for s, _, o in self.seen for n in (s, o)})

    @property
    def edges(self) -> int:
        return len(self.seen)
