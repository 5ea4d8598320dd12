"""ARK's KG augmentation (Sec. 3.2, Alg. 1): confusing questions with the same answer.

For one training question, over the knowledge graph of its candidate units (the shared
extraction, any ``extraction.method``):

1. Entity similarity edges join every two entities whose name embeddings (base
   embedder) have cosine ≥ 0.8, against the sparsity of per-chunk extraction.
2. Seeds are the entities the question or its answer names: an entity is a seed when its
   name occurs as whole words in the answer or the question (``is_grounded``), so a
   question's own topic and its answer both anchor the walk.
3. Personalised PageRank from the seeds (damping 0.85) ranks the graph; scores below
   ε = 1e-4 are dropped, and a subgraph ends at the largest gap of −log score inside a
   size window: 20–50 nodes for the large subgraph, 3–10 for the small one (the
   released code's sizes). A graph smaller than a window's lower end is kept whole.
4. One JSON-schema constrained call per subgraph writes confusing questions with the
   original answer (``{"confusing_questions": [...]}``).

A question with no seed or no subgraph, or whose generation never parses, is skipped
and counted by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kgrag.graphs.names import clean, is_grounded
from kgrag.graphs.ppr import personalised_pagerank

if TYPE_CHECKING:
    import scipy.sparse as sp

PROMPT = """You write confusing questions for training a retriever.
Below is an original question, its answer, and entities from the documents around it.
Write {n} different questions that have exactly the same answer as the original. Weave in
details of the entities to mislead: compare or contrast entities, ask for a cause or an
effect, quote a term from a description, or ask from another perspective. Do not reuse the
original question's wording. Each question is one grammatical sentence ending with "?".

{payload}

Reply with JSON: {{"confusing_questions": ["...", "..."]}}"""
DESCRIPTION_CHARS = 160  # of each entity description shown, to keep prompts short
SHOWN_ENTITIES = 30  # at most, best PPR score first


@dataclass(frozen=True)
class QuestionGraph:
    """The knowledge graph around one question: entity rows and a symmetric adjacency."""

    names: list[str]
    types: list[str]
    descriptions: list[str]
    adjacency: sp.csr_matrix
    similarity_edges: int


def question_graph(names: Sequence[str], types: Sequence[str], descriptions: Sequence[str],
                   edges: Sequence[tuple[str, str, float]], vectors: np.ndarray,
                   threshold: float) -> QuestionGraph:
    """The entities and relationships of a question's units, plus the similarity edges
    (weight 1) between entities whose vectors have cosine ≥ ``threshold``."""
    import scipy.sparse as sp  # imported where a sparse matrix is made, not by every command

    index = {name: i for i, name in enumerate(names)}
    rows, cols, weights = [], [], []
    for source, target, weight in edges:
        if source in index and target in index and source != target:
            rows += [index[source], index[target]]
            cols += [index[target], index[source]]
            weights += [float(weight), float(weight)]
    similar = 0
    if len(names) > 1:
        cosine = vectors @ vectors.T
        pairs = np.argwhere(np.triu(cosine >= threshold, k=1))
        similar = len(pairs)
        for i, j in pairs:
            rows += [i, j]
            cols += [j, i]
            weights += [1.0, 1.0]
    n = len(names)
    adjacency = sp.csr_matrix((weights, (rows, cols)), shape=(n, n))
    return QuestionGraph(list(names), list(types), list(descriptions), adjacency, similar)


def seeds(graph: QuestionGraph, question: str, answer: str) -> list[int]:
    """The entities the answer or the question names (whole words, any case)."""
    return [i for i, name in enumerate(graph.names)
            if is_grounded(name, answer) or is_grounded(name, question)]


def ranked(graph: QuestionGraph, seed_ids: list[int], damping: float, epsilon: float
           ) -> list[tuple[int, float]]:
    """Nodes by PPR score from the seeds, best first, those below ``epsilon`` dropped."""
    restart = np.zeros(len(graph.names))
    restart[seed_ids] = 1.0
    scores = personalised_pagerank(graph.adjacency, restart, damping, tol=epsilon / 100)
    order = np.argsort(-scores, kind="stable")
    return [(int(i), float(scores[i])) for i in order if scores[i] >= epsilon]


def cut(items: list[tuple[int, float]], low: int, high: int) -> list[int]:
    """The nodes before the largest gap of −log score whose cut keeps between ``low`` and
    ``high`` nodes; all of them when there are no more than ``low``."""
    if len(items) <= low:
        return [i for i, _ in items]
    x = -np.log([s for _, s in items])
    last = min(high, len(items) - 1)  # a cut after k nodes needs a (k+1)-th
    gaps = [(x[k] - x[k - 1], k) for k in range(low, last + 1)]
    keep = max(gaps, key=lambda g: (g[0], -g[1]))[1] if gaps else len(items)
    return [i for i, _ in items[:keep]]


def prompt(graph: QuestionGraph, nodes: list[int], question: str, answer: str, n: int) -> str:
    """The generation prompt: the paper's JSON input (original question, answer,
    entities with their descriptions)."""
    entities = [{"name": graph.names[i], "type": graph.types[i],
                 "descriptions": [d[:DESCRIPTION_CHARS] for d in
                                  graph.descriptions[i].split("; ")[:2] if d]}
                for i in nodes[:SHOWN_ENTITIES]]
    payload = json.dumps({"original_question": question, "answer": answer,
                          "entities": entities}, ensure_ascii=False, indent=1)
    return PROMPT.format(n=n, payload=payload)


def schema(n: int) -> dict:
    return {"type": "object", "properties": {"confusing_questions": {
        "type": "array", "minItems": 1, "maxItems": n,
        "items": {"type": "string", "minLength": 10, "maxLength": 240}}},
        "required": ["confusing_questions"]}


def validated(question: str):
    """The check a generation must pass: at least one usable question. Kept: distinct
    questions (ending in "?") other than the original; the rest are dropped."""
    original = clean(question).casefold()

    def check(obj: dict) -> list[str]:
        kept: list[str] = []
        for text in obj["confusing_questions"]:
            text = clean(text)
            if text.endswith("?") and text.casefold() != original and text not in kept:
                kept.append(text)
        if not kept:
            raise ValueError("no usable question (none ends with '?' or all repeat the "
                             "original)")
        return kept

    return check
