"""One question's retrieval graph as arrays: what ReG's two graph retrievers (the
SubgraphRAG triple scorer and the PNA entity scorer) read, train on and score.

A question graph is the candidate subgraph retrieved for one question: its entities and
relations, each with a text embedding, its triples as index arrays into them, and the
question's topic entities. ``textless`` marks entities with no usable name (Freebase
``m.``/``g.`` ids): the scorers give them one shared learned embedding instead of the
embedding of their id. ``labels`` are the 0/1 weak triple labels for training; ``None``
at inference. ``similarity`` is each triple's cosine to the question over its text embedding
(what ``triple_cosine`` ranks by), which the triple scorer may read as a match feature.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kgrag.errors import KgragError


@dataclass(frozen=True)
class QuestionGraph:
    question: np.ndarray        # (d,) float32
    entities: np.ndarray        # (n_e, d) float32
    textless: np.ndarray        # (n_e,) bool
    relations: np.ndarray       # (n_r, d) float32
    head: np.ndarray            # (n_t,) int64
    relation: np.ndarray        # (n_t,) int64
    tail: np.ndarray            # (n_t,) int64
    topic: np.ndarray           # (k,) int64
    labels: np.ndarray | None = None   # (n_t,) float32 0/1
    similarity: np.ndarray | None = None   # (n_t,) float32: cosine(question, triple text)

    @property
    def triples(self) -> int:
        return len(self.head)

    def check(self) -> None:
        """Raise KgragError when the arrays disagree in shape or index out of range."""
        d = self.question.shape[-1]
        n_e, n_r, n_t = len(self.entities), len(self.relations), len(self.head)
        problems = []
        if self.question.ndim != 1:
            problems.append("the question embedding is not a vector")
        if self.entities.shape != (n_e, d) or self.relations.shape != (n_r, d):
            problems.append(f"entity/relation embeddings are not (n, {d})")
        if self.textless.shape != (n_e,):
            problems.append("textless does not have one flag per entity")
        if len(self.relation) != n_t or len(self.tail) != n_t:
            problems.append("head, relation and tail differ in length")
        if self.labels is not None and len(self.labels) != n_t:
            problems.append("labels do not have one value per triple")
        if self.similarity is not None and len(self.similarity) != n_t:
            problems.append("similarity does not have one value per triple")
        for name, index, bound in (("head", self.head, n_e), ("tail", self.tail, n_e),
                                   ("relation", self.relation, n_r),
                                   ("topic", self.topic, n_e)):
            if len(index) and (index.min() < 0 or index.max() >= bound):
                problems.append(f"{name} indices fall outside 0..{bound - 1}")
        if problems:
            raise KgragError("malformed question graph: " + "; ".join(problems))
