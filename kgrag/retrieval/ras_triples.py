"""RAS's text-to-triples and per-query graph (Jiang et al., Eq. 4–6, §2.2 of the notes).

Text-to-triples runs the spec's shared extraction (``extraction.method``) on each
retrieved passage instead of the paper's fine-tuned t2t model: ``nlp`` (spaCy, no LLM,
instant) or ``llm`` (one grammar-constrained call per passage), both cached like every
extraction. A relationship becomes the triple (source, predicate, target): with
``nlp`` the predicate is its dependency-path label ("directed by", "born"); its
unlabelled co-occurrence edges state no predicate and give no triple. With ``llm`` the
predicate is the relationship's description. Names are the extraction's normalised
(upper-case) names, shown in the passage's own casing when it contains them.

A triple renders as RAS's text says (``kgrag.training.ras_text.render``). A passage
with no triple adds nothing to the graph and is counted in the trace.

The per-query graph keeps, per sub-query, the triples it added (a triple already in
the graph is not added again): the Graph-LLM encodes each sub-query's subgraph apart
and mean-pools them (App. C.2), and the history shows each sub-query's triples. Its
nodes are the unique subject and object strings (exact match: no entity resolution).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgrag.errors import KgragError
from kgrag.graphs.elements import Extraction
from kgrag.graphs.extraction import extract
from kgrag.graphs.nlp_extraction import LABELLED_STRENGTH, Chunk, NlpExtractor
from kgrag.training.ras_text import Triple

LLM_PREDICATE_WORDS = 8  # an LLM relationship's description, cut to a predicate's length
NLP_LABELLED = ": "  # the nlp extractor describes a labelled relationship "<label>: <sentence>"


def _cased(name: str, text: str) -> str:
    """``name`` as the passage writes it, when it does."""
    found = re.search(re.escape(name), text, flags=re.IGNORECASE)
    return found.group(0) if found else name


def triples_of(extraction: Extraction, text: str, method: str) -> list[Triple]:
    """The triples one passage's extraction states, in order, without repeats."""
    out: dict[Triple, None] = {}
    for rel in extraction.relationships:
        if method == "nlp":
            if rel.strength != LABELLED_STRENGTH:  # a co-occurrence states no predicate
                continue
            predicate = rel.description.split(NLP_LABELLED, 1)[0]
        else:
            predicate = " ".join(rel.description.split()[:LLM_PREDICATE_WORDS])
        out[(_cased(rel.source, text), predicate.strip(), _cased(rel.target, text))] = None
    return list(out)


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
    method = extraction.get("method", "llm")
    if method == "nlp":
        nlp = NlpExtractor(models.pipeline, models.cache)

        def by_nlp(chunks: list[Chunk]) -> list[list[Triple]]:
            return [triples_of(x, c.text, "nlp") for x, c in zip(nlp.extract(chunks), chunks)]

        return by_nlp
    if method == "llm":
        llm = models.llm("extractor")

        def by_llm(chunks: list[Chunk]) -> list[list[Triple]]:
            return [triples_of(extract(llm, c.chunk_id, c.unit, style=extraction["prompt"],
                                       max_tokens=extraction["max_tokens"],
                                       max_entities=extraction["max_entities"],
                                       max_relationships=extraction["max_relationships"],
                                       keep_ungrounded=extraction["keep_ungrounded"]), c.unit,
                               "llm")
                    for c in chunks]

        return by_llm
    raise KgragError(f"strategy ras turns passages into triples with extraction method nlp "
                     f"or llm, not {method!r}")


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
