"""HugRAG's structural retrieval metrics (App. E), computed exactly from gold sentences.

A question's *gold nodes* are the graph's entities whose (normalised) name occurs,
as whole words, in one of its gold context sentences — the paper maps gold
evidence to graph nodes without saying how; name occurrence needs no LLM and can
be checked by hand. Per question, over the entities an expansion reached:

* reachability — at least one gold node was reached (1 / 0);
* coverage — the share of its gold nodes reached;
* min hops — the fewest hops from a seed at which a gold node was reached.

Means are over the questions that have gold nodes. Min hops, as in the paper, is
averaged only over the questions reachable both with and without gates, so the two
figures compare the same questions. The depth-weighted reachability is left out:
its formula is missing from the paper's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kgrag.answer.matching import normalize_answer


def gold_nodes(names: Iterable[str], gold_sentences: Sequence[str]) -> set[str]:
    """The entity names that occur as whole words in a gold sentence."""
    haystacks = [f" {normalize_answer(s)} " for s in gold_sentences]
    found = set()
    for name in names:
        needle = normalize_answer(name)
        if needle and any(f" {needle} " in h for h in haystacks):
            found.add(name)
    return found


def _one(reached: Mapping[str, int], gold: set[str]) -> tuple[float, float, int | None]:
    hit = [hop for name, hop in reached.items() if name in gold]
    return float(bool(hit)), len(set(reached) & gold) / len(gold), min(hit) if hit else None


def structural_metrics(traces: Sequence[Mapping[str, Any]], golds: Sequence[set[str]]
                       ) -> dict[str, float | int | None]:
    """Mean reachability, coverage and min hops with gates (and without, when the traces
    hold a gate-free expansion), over the questions with gold nodes."""
    pairs = [(t, g) for t, g in zip(traces, golds) if g and "reached" in t]
    out: dict[str, float | int | None] = {"structural_questions": len(pairs)}
    if not pairs:
        return out
    with_gates = [_one(t["reached"], g) for t, g in pairs]
    out["reachability"] = _mean(r for r, _, _ in with_gates)
    out["gold_coverage"] = _mean(c for _, c, _ in with_gates)
    if not all("reached_without_gates" in t for t, _ in pairs):
        out["min_hops"] = _mean(h for _, _, h in with_gates if h is not None)
        return out
    without = [_one(t["reached_without_gates"], g) for t, g in pairs]
    out["reachability_no_gates"] = _mean(r for r, _, _ in without)
    out["gold_coverage_no_gates"] = _mean(c for _, c, _ in without)
    both = [(a[2], b[2]) for a, b in zip(with_gates, without)
            if a[2] is not None and b[2] is not None]
    out["min_hops"] = _mean(a for a, _ in both)
    out["min_hops_no_gates"] = _mean(b for _, b in both)
    return out


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else None
