"""HugRAG's search over its graph (paper §3.2, App. B.2): score, seed, expand.

1. **Hybrid score** of every node, s(q, v) = α·cos(q, v) + (1−α)·lex(q, v), where
   lex is the share of the question's keywords found in the node's text (title and
   summary / name and description / chunk text); α = 0.7 favours meaning.
2. **Seeds by MMR** (λ = 0.7), separately over entities and over the modules of
   every level (3 + 3): each pick maximises λ·s − (1−λ)·(max cosine to the seeds of
   its kind already picked). The strategy keeps seeds that score above 0.
3. **Gated best-first expansion**: a max-heap on gain, seeds at their score; a node
   reached from u at hop h+1 over an edge of type t has gain s(q, v)·w(t)·γ^(h+1)
   (γ = 0.7). The gain is per node (the paper's Eq. 2 is lost from the text; a
   product along the path would make every 3-hop node negligible at γ = 0.7).
   Popping a node adds it when its text fits the budget; its ``fan_out`` best
   unvisited neighbours are pushed while h < ``max_hops``. It stops when the heap is
   empty or the budget is spent. Relationships between chosen entities are then
   added, strongest first, while the budget lasts (``relationships_among``).

   With per-kind ``caps`` (``evidence_split: grounded``) each kind of node has its own share
   of the budget, so module summaries and entity rows cannot crowd out the source text:
   a node that does not fit its kind's share is not chosen but is still expanded, so a
   full share never blocks the path to the chunks beyond it; the expansion then ends in
   the chunks that ground the entities it reached, best gain first. With a chunks' cap of
   0 the walk picks rows only, records the nodes it walked through and every node's best
   gain (``Walk``), and the strategy ranks the chunks after it.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from kgrag.retrieval.hugrag.graph import HugragGraph, words


def hybrid_scores(graph: HugragGraph, question: str, vector: np.ndarray, alpha: float
                  ) -> np.ndarray:
    """s(q, v) for every node: α·cosine + (1−α)·share of question keywords in v."""
    semantic = graph.vectors @ vector.astype(np.float32)
    asked = set(words(question))
    wanted = sorted(graph.vocabulary[w] for w in asked if w in graph.vocabulary)
    lexical: np.ndarray = np.zeros(len(graph.nodes), dtype=np.float32)
    if wanted and asked:
        lexical = np.asarray(graph.lexicon[:, wanted].sum(axis=1)).ravel() / len(asked)
    return alpha * semantic + (1 - alpha) * lexical


def mmr(graph: HugragGraph, scores: np.ndarray, kind: str, k: int, lam: float) -> list[int]:
    """k nodes of one kind by maximal marginal relevance (ties: lower index)."""
    pool = np.flatnonzero(graph.kind == kind)
    chosen: list[int] = []
    if not len(pool):
        return chosen
    redundancy = np.full(len(pool), 0.0, dtype=np.float32)
    available = np.ones(len(pool), dtype=bool)
    for _ in range(min(k, len(pool))):
        value = lam * scores[pool] - (1 - lam) * redundancy
        value[~available] = -np.inf
        pick = int(np.argmax(value))
        available[pick] = False
        chosen.append(int(pool[pick]))
        similarity = graph.vectors[pool] @ graph.vectors[pool[pick]]
        redundancy = similarity if len(chosen) == 1 else np.maximum(redundancy, similarity)
    return chosen


@dataclass
class Walk:
    """One best-first expansion: chosen node → hop (in the order chosen), tokens used,
    the nodes walked through because their kind's share was full (node → hop, in the
    order popped) and every pushed node's best gain."""

    chosen: dict[int, int]
    used: int
    passed: dict[int, int] = field(default_factory=dict)
    gains: dict[int, float] = field(default_factory=dict)


def expand(graph: HugragGraph, seeds: list[int], scores: np.ndarray, budget: int, *,
           weights: dict[str, float], decay: float, max_hops: int, fan_out: int,
           allowed: frozenset[str], caps: Mapping[str, int] | None = None) -> Walk:
    """Best-first gated expansion within ``budget``; ``caps`` (node kind → tokens at most)
    splits the budget between kinds."""
    heap = [(-float(scores[s]), 0, s) for s in dict.fromkeys(seeds)]
    heapq.heapify(heap)
    walk = Walk({}, 0, gains={s: float(scores[s]) for s in seeds})
    expanded: set[int] = set()
    spent = dict.fromkeys(caps or (), 0)
    while heap and walk.used < budget:
        _, hop, node = heapq.heappop(heap)
        tokens, node_kind = graph.nodes[node].tokens, graph.nodes[node].kind
        if node in walk.chosen or node in expanded:
            continue
        if walk.used + tokens <= budget and (
                caps is None or spent[node_kind] + tokens <= caps[node_kind]):
            walk.chosen[node] = hop
            walk.used += tokens
            if caps is not None:
                spent[node_kind] += tokens
        elif caps is None:
            continue
        else:
            walk.passed[node] = hop
        expanded.add(node)
        if hop >= max_hops:
            continue
        step = decay ** (hop + 1)
        frontier = sorted(
            ((float(scores[v]) * weights[kind] * step, v)
             for v, kind in graph.edges[node] if kind in allowed and v not in expanded),
            key=lambda pair: (-pair[0], pair[1]))
        for gain, v in frontier[:fan_out]:
            heapq.heappush(heap, (-gain, hop + 1, v))
            walk.gains[v] = max(gain, walk.gains.get(v, 0.0))
    return walk


def relationships_among(graph: HugragGraph, chosen: dict[int, int], room: int
                        ) -> tuple[list[tuple[str, int]], int]:
    """Relationship rows joining two chosen entities, strongest first, within ``room``."""
    rows, used = [], 0
    for a, b, text, tokens in graph.relationships:
        if a in chosen and b in chosen and used + tokens <= room:
            rows.append((text, tokens))
            used += tokens
    return rows, used


def best_chunks(graph: HugragGraph, scores: np.ndarray, chosen: dict[int, int], room: int
                ) -> tuple[list[int], int]:
    """Chunks not yet chosen, best hybrid score first (ties: lower index), while they fit
    in ``room``: what fills the chunks' share when the expansion reached too few."""
    pool = np.flatnonzero(graph.kind == "chunk")
    picked, used = [], 0
    for i in pool[np.argsort(-scores[pool], kind="stable")]:
        node = int(i)
        if node not in chosen and used + graph.nodes[node].tokens <= room:
            picked.append(node)
            used += graph.nodes[node].tokens
        if used >= room:
            break
    return picked, used
