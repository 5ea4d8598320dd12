"""Seed linking beyond graph names found in the question, for personalised PageRank.

``EntityGraph.link`` finds the graph's names in the question word for word. Two
additions, each off unless a spec sets it: entities found in the question by the
same extractor, with an embedding nearest-neighbour fallback:

* ``ExtractorMentions``: the question parsed by the nlp extraction's spaCy pipeline
  and its mentions found by the very rules that found the graph's entities in the
  chunks (``kgrag.graphs.mentions``), so a question's "the Fox film" meets the
  chunk's "FOX FILM" through the same trimming and normalisation.
* ``NearestNames``: a mention no graph name matches is linked to the name whose
  MiniLM vector is nearest, when the cosine reaches a threshold ("Tolkien's novel"
  → "TOLKIEN NOVEL" is no exact match, its vector is close).

The same name vectors serve ``synonym_pairs``: HippoRAG's synonym edges between
entities whose names embed close together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from kgrag.graphs.mentions import sentence_mentions
from kgrag.graphs.name_pairs import cosine_pairs
from kgrag.models.pipelines import ResolvedPipeline, load_pipeline

Embed = Callable[[list[str]], np.ndarray]


class ExtractorMentions:
    """The question's entity mentions, found by the extraction's spaCy rules."""

    def __init__(self, pipeline: ResolvedPipeline,
                 load: Callable[[ResolvedPipeline], Any] = load_pipeline) -> None:
        self.nlp = load(pipeline)

    def __call__(self, question: str) -> list[str]:
        """Normalised mention names in question order, each once."""
        doc = self.nlp(question)
        names = [m.name for sentence in doc.sents
                 for m in sentence_mentions(sentence, Counter())]
        return list(dict.fromkeys(names))


class NearestNames:
    """Links a mention to the graph name nearest in embedding space, at a minimum cosine."""

    def __init__(self, vectors: np.ndarray, embed: Embed, threshold: float) -> None:
        self.vectors, self.embed, self.threshold = vectors, embed, threshold

    def link(self, mentions: list[str]) -> dict[str, int]:
        """Mention → entity node, for the mentions whose nearest name is close enough."""
        if not mentions or not len(self.vectors):
            return {}
        similarity = self.embed(mentions) @ self.vectors.T
        best = np.argmax(similarity, axis=1)
        return {mention: int(node) for mention, node, row in zip(mentions, best, similarity)
                if row[node] >= self.threshold}


def synonym_pairs(vectors: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """(i, j, cosine) for every pair of names whose vectors are at least ``threshold``
    close: HippoRAG's synonym edges, weighted by their similarity."""
    return [(i, j, float(vectors[i] @ vectors[j])) for i, j in cosine_pairs(vectors, threshold)]
