"""Query-to-fact linking for personalised PageRank: HippoRAG 2's seeding, LLM-free.

Exact name matching finds an entity only when the question spells its name, and a
corpus without titles gives the question little to spell. HippoRAG 2 links the
question to *facts* instead: every extracted relationship is rendered as a short
sentence, "SUBJECT relation OBJECT", embedded once, and the question's vector is
compared with them; the entities of the nearest facts seed the walk, each weighted by
the fact's similarity. A fact is a sentence-like text, so it meets a question's
vector far better than a bare name does ("Who directed the film that won ..." is
close to "FORBIDDEN GROUND directed by JOHAN EARL", not to "JOHAN EARL").

A relationship's relation is the label the nlp extractor wrote before the colon of
its description ("directed by: <sentence>"); one without a label (a co-occurrence,
or an LLM's free description) reads "SUBJECT and OBJECT". Relationships whose ends
are not both nodes of the walked graph are left out.

The same links serve phrase nodes (``FactLinks.names``): a name is a fact with one
end, itself, so the question's vector can also meet the phrases it paraphrases.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from kgrag.graphs.names import normalise_name

Embed = Callable[[list[str]], np.ndarray]
LABEL = re.compile(r"^([a-z][a-z ]{0,40}): ")


def fact_text(source: str, target: str, description: str) -> str:
    """A relationship as the sentence that is embedded: its ends joined by its label."""
    label = LABEL.match(description or "")
    return f"{source} {label.group(1) if label else 'and'} {target}"


@dataclass(frozen=True)
class FactLinks:
    """The walked graph's facts (their two entity nodes) and their vectors."""

    ends: np.ndarray  # (facts, 2) entity nodes
    vectors: np.ndarray  # (facts, dim), unit length
    top_k: int

    @classmethod
    def build(cls, relationships: pl.DataFrame, node_of: Callable[[str], int | None],
              embed: Embed, top_k: int) -> FactLinks:
        """The facts of ``relationships`` whose ends ``node_of`` finds, embedded with
        ``embed`` (each distinct text once)."""
        texts: dict[str, int] = {}
        ends: list[tuple[int, int]] = []
        owner: list[int] = []
        for source, target, description in relationships.select(
                "source", "target", "description").iter_rows():
            a, b = node_of(normalise_name(source)), node_of(normalise_name(target))
            if a is None or b is None or a == b:
                continue
            text = fact_text(normalise_name(source), normalise_name(target), description)
            owner.append(texts.setdefault(text, len(texts)))
            ends.append((a, b))
        vectors = embed(list(texts)) if texts else np.zeros((0, 1), dtype=np.float32)
        return cls(np.array(ends, dtype=np.int64).reshape(-1, 2),
                   np.asarray(vectors, dtype=np.float32)[owner], top_k)

    @classmethod
    def names(cls, vectors: np.ndarray, top_k: int) -> FactLinks:
        """Links to the phrase nodes themselves, by their name vectors (node order)."""
        nodes = np.arange(len(vectors), dtype=np.int64)
        return cls(np.stack([nodes, nodes], axis=1), np.asarray(vectors, dtype=np.float32),
                   top_k)

    def link(self, vector: np.ndarray) -> dict[int, float]:
        """Entity node → the highest similarity of a top-k fact it is an end of."""
        if not len(self.ends):
            return {}
        similarity = self.vectors @ vector.astype(np.float32)
        k = min(self.top_k, len(similarity))
        top = np.argpartition(-similarity, k - 1)[:k]
        linked: dict[int, float] = {}
        for fact in top[np.argsort(-similarity[top], kind="stable")]:
            score = float(max(similarity[fact], 0.0))
            for node in self.ends[fact]:
                linked[int(node)] = max(linked.get(int(node), 0.0), score)
        return linked
