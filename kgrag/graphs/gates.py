"""Causal gate search with top-down hierarchical pruning (HugRAG Eq. 1, Alg. 2).

A causal gate is an edge between two modules that are far apart in the graph but
whose summaries an LLM judges causally connected; retrieval can then cross from one
dense module to the other instead of staying trapped in it. Checking every pair of
N modules costs N(N-1)/2 LLM calls, so the paper prunes top-down: a gate between two
modules covers their subtrees. This module decides *which* pairs are put to the
judge and in what order; the judge itself is a callable from the caller (an LLM's
yes / no over two summaries, ``llm_verdict``, or ``similarity_judge``), so the search
is testable with plain functions. The judge takes a batch of pairs at a time: the
pairs of one compared set that pruning leaves, which cannot prune one another, so an
executor may check them at once (``kgrag.models.executor``).

Decisions the paper leaves open, made here:

* **Candidates** ("topologically distant but potentially logically related"): a
  pair (A, B) is a candidate when (i) neither is an ancestor of the other (that
  link is already a hierarchy edge); (ii) no structural relationship joins a member
  of A to a member of B (``adjacent``; ``module_adjacency`` computes it); (iii) the
  cosine of their summary vectors is >= ``min_similarity`` and B is among A's
  ``top_m`` most similar eligible partners in the set being compared, or A among
  B's. "Eligible" means passing (i) and (ii), so adjacent modules do not use up
  top-m slots. Ties in similarity go to the lower module id. Each side names at
  most ``top_m`` partners, so a comparison of sets X and Y has at most
  ``top_m * (|X| + |Y|)`` candidates and the checks grow linearly in N.
* **Compared sets.** Per level ℓ (coarsest first): the level's modules with each
  other (intra-level), then the level's modules against level ℓ+1 (look-ahead;
  top-m is ranked within those two sets). Modules two or more levels apart are
  never compared directly.
* **Pruning (transitivity).** Candidates are fixed before any check; when its turn
  comes, a candidate (A, B) is skipped when an ancestor-or-self of A is already
  gated to an ancestor-or-self of B (other than A-B itself). This covers the paper's
  look-ahead exclusions (children of a module gated to Mi; Mi's own children are
  never candidates, by (i)) and also skips intra-level pairs whose parents, or
  one's parent and the other, were gated earlier. So
  ``checks + skipped_by_pruning == candidates``.
* **Order.** Intra-level pairs in (lower id, higher id) order, then look-ahead by
  the level-ℓ module's id, then the level-ℓ+1 module's id; ids compare by number
  ("M2" < "M10"). The judge always gets the lower id first, so a cached LLM
  replays the same calls in the same order.
* **Batches.** Pruning a candidate needs a gate between an ancestor-or-self of one
  side and an ancestor-or-self of the other, other than the pair itself; within one
  compared set every such pair lies at coarser levels, or a set compared before. So
  a set's remaining candidates are judged as one batch, in the order above, after
  every earlier set's verdicts are in.
* **Gates are undirected**, reported as (lower id, higher id) pairs in id order.
* **Vectors** (one per module, e.g. the summary embedding) are re-normalised here;
  a zero vector has cosine 0 with everything. Similarities are dense per compared
  set (a few thousand modules at most, some tens of MB).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from kgrag.errors import KgragError
from kgrag.graphs.extraction.prompt import Style
from kgrag.graphs.hierarchy import Hierarchy
from kgrag.models.llm import CachedLLM

Pair = tuple[str, str]
Judge = Callable[[list[Pair]], list[bool]]
Adjacency = Callable[[str, str], bool] | set[frozenset[str]]

GATE_INSTRUCTION = (
    "Two groups of findings from research articles are summarised below. Is there a plausible "
    "causal or logical connection between them: does one cause, enable, influence or explain "
    "the other? Answer yes or no."
)
YES_NO = 'root ::= "yes" | "no"'


@dataclass(frozen=True)
class GateSearch:
    """The gates found and what finding them cost.

    ``checks`` is the number of pairs judged; ``candidates`` the number of pairs
    the candidate rule admitted; ``skipped_by_pruning`` the candidates never checked
    because a gate between ancestors covered them; ``all_pairs`` = N(N-1)/2 over all
    N modules, the cost of checking every pair.
    """

    gates: list[tuple[str, str]] = field(default_factory=list)
    checks: int = 0
    candidates: int = 0
    skipped_by_pruning: int = 0
    all_pairs: int = 0


def id_number(module_id: str) -> int:
    """The numeric part of "M12" (ids sort by it, not as strings)."""
    digits = module_id.lstrip("M")
    if not digits.isdigit():
        raise KgragError(f"module ids look like 'M12'; got {module_id!r}")
    return int(digits)


def _ordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if id_number(a) < id_number(b) else (b, a)


def module_adjacency(hierarchy: Hierarchy,
                     relationships: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
    """Pairs of modules (any levels) joined by at least one structural edge
    between their members; pairs where one module contains the other are left out
    (they are never gate candidates). Endpoints in no module are ignored."""
    chains: dict[str, tuple[str, ...]] = {}

    def chain(entity: str) -> tuple[str, ...]:
        if entity not in chains:
            leaf = hierarchy.leaf_module_of(entity)
            chains[entity] = () if leaf is None else (leaf, *hierarchy.ancestors(leaf))
        return chains[entity]

    pairs: set[frozenset[str]] = set()
    for source, target in relationships:
        a_chain, b_chain = chain(source), chain(target)
        for a in a_chain:
            for b in b_chain:
                if a not in b_chain and b not in a_chain:
                    pairs.add(frozenset((a, b)))
    return pairs


def _unit_vectors(ids: list[str], vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    """Row-normalised vectors for ``ids`` (KgragError when one is missing)."""
    missing = [m for m in ids if m not in vectors]
    if missing:
        raise KgragError(f"no summary vector for module(s) {', '.join(missing[:5])}")
    if not ids:
        return np.zeros((0, 0), dtype=np.float64)
    rows = [np.asarray(vectors[m], dtype=np.float64).ravel() for m in ids]
    if len({r.shape for r in rows}) != 1:
        raise KgragError("module summary vectors differ in dimension")
    matrix = np.vstack(rows)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _top_partners(sims: np.ndarray, rows: list[str], cols: list[str],
                  eligible: Callable[[str, str], bool], top_m: int,
                  min_similarity: float) -> set[tuple[str, str]]:
    """For each row module, its ``top_m`` most similar eligible column modules with
    cosine >= ``min_similarity`` (ties to the lower column id), as (row, col) pairs."""
    chosen: set[tuple[str, str]] = set()
    if top_m <= 0 or not cols:
        return chosen
    col_rank = np.array([id_number(c) for c in cols])
    for i, row in enumerate(rows):
        order = np.lexsort((col_rank, -sims[i]))
        taken = 0
        for j in order:
            if sims[i, j] < min_similarity or taken == top_m:
                break
            if eligible(row, cols[j]):
                chosen.add((row, cols[j]))
                taken += 1
    return chosen


def candidate_pairs(xs: list[str], ys: list[str], unit: Mapping[str, np.ndarray],
                    eligible: Callable[[str, str], bool], *, top_m: int,
                    min_similarity: float) -> list[tuple[str, str]]:
    """Candidates between module sets ``xs`` and ``ys`` (equal for intra-level),
    as (lower id, higher id) pairs in order. See the module docstring for the rule."""
    if not xs or not ys:
        return []
    x_vecs = np.vstack([unit[m] for m in xs])
    y_vecs = np.vstack([unit[m] for m in ys])
    sims = x_vecs @ y_vecs.T
    pairs = _top_partners(sims, xs, ys, eligible, top_m, min_similarity)
    pairs |= {(x, y) for y, x in _top_partners(sims.T, ys, xs,
                                               lambda a, b: eligible(b, a),
                                               top_m, min_similarity)}
    ordered = {_ordered(a, b) for a, b in pairs if a != b}
    return sorted(ordered, key=lambda p: (id_number(p[0]), id_number(p[1])))


def _adjacency_test(adjacent: Adjacency) -> Callable[[str, str], bool]:
    if callable(adjacent):
        return adjacent
    return lambda a, b: frozenset((a, b)) in adjacent


def similarity_judge(vectors: Mapping[str, np.ndarray], threshold: float
                     ) -> Callable[[str, str], bool]:
    """A judge with no LLM: yes when the two modules' summary vectors have cosine at
    least ``threshold``. Every candidate already passed ``min_similarity`` and top-m,
    so this keeps the most related of them; what it cannot see is causality, which is
    why it is an option beside the LLM's yes / no and not a replacement of it."""
    ids = sorted(vectors, key=id_number)
    unit = dict(zip(ids, _unit_vectors(ids, vectors)))

    def judge(a: str, b: str) -> bool:
        return float(unit[a] @ unit[b]) >= threshold

    return judge


def llm_verdict(text: Mapping[str, str], *, style: Style
                ) -> Callable[[CachedLLM, Pair], str]:
    """``verdict(llm, (a, b))``: the LLM's "yes" / "no" on whether two modules (their
    summaries in ``text``) are causally linked, under a grammar; a reply that is neither
    (a model that ignores grammars) is "other", which the caller reads as no and counts."""

    def verdict(llm: CachedLLM, pair: Pair) -> str:
        a, b = pair
        prompt = f"{GATE_INSTRUCTION}\n\nGroup A: {text[a]}\n\nGroup B: {text[b]}\n\nAnswer:"
        reply = llm.ask(prompt, style=style, max_tokens=2, grammar=YES_NO).text.strip().lower()
        return reply if reply in ("yes", "no") else "other"

    return verdict


def find_gates(hierarchy: Hierarchy, vectors: Mapping[str, np.ndarray],
               adjacent: Adjacency, judge: Judge, *, top_m: int = 3,
               min_similarity: float = 0.5) -> GateSearch:
    """Search the hierarchy for causal gates, top-down with pruning.

    ``vectors`` maps every module id to its summary vector; ``adjacent`` says
    whether two modules are joined by a structural edge (a function, or the set from
    ``module_adjacency``); ``judge(pairs)`` returns the LLM's yes/no (True/False) on
    each pair of a batch, in order, each pair with the lower id first (see "Batches").
    Deterministic for deterministic inputs.
    """
    if top_m < 0:
        raise KgragError(f"top_m must be >= 0; got {top_m}")
    ids = [m.module_id for m in hierarchy.modules]
    unit = dict(zip(ids, _unit_vectors(ids, vectors)))
    lineage = {m: {m, *hierarchy.ancestors(m)} for m in ids}
    is_adjacent = _adjacency_test(adjacent)

    def eligible(a: str, b: str) -> bool:
        return (a != b and a not in lineage[b] and b not in lineage[a]
                and not is_adjacent(a, b))

    gated: set[frozenset[str]] = set()

    def covered(a: str, b: str) -> bool:
        return any(frozenset((x, y)) in gated for x in lineage[a] for y in lineage[b]
                   if (x, y) != (a, b) and x != y)

    levels = sorted(hierarchy.levels())
    by_level = {lv: sorted((m.module_id for m in hierarchy.at_level(lv)), key=id_number)
                for lv in levels}
    gates: list[tuple[str, str]] = []
    checks = candidates = skipped = 0
    for level in levels:
        current = by_level[level]
        batches = [candidate_pairs(current, current, unit, eligible, top_m=top_m,
                                   min_similarity=min_similarity)]
        if level + 1 in by_level:
            batches.append(candidate_pairs(current, by_level[level + 1], unit, eligible,
                                           top_m=top_m, min_similarity=min_similarity))
        for batch in batches:
            candidates += len(batch)
            checked = [pair for pair in batch if not covered(*pair)]
            skipped += len(batch) - len(checked)
            checks += len(checked)
            for (a, b), yes in zip(checked, judge(checked), strict=True):
                if yes:
                    gated.add(frozenset((a, b)))
                    gates.append((a, b))
    n = len(ids)
    return GateSearch(
        gates=sorted(gates, key=lambda p: (id_number(p[0]), id_number(p[1]))),
        checks=checks,
        candidates=candidates,
        skipped_by_pruning=skipped,
        all_pairs=n * (n - 1) // 2,
    )
