"""ReG's structure-aware reorganisation (S-II): retrieved triples become BFS reasoning
chains from the question's topic entities, merged, and written ``Chain i. e0 → [r1] → e1 …``.

Algorithm 1, both directions: forward chains start at a topic entity as the head of their
first triple and grow along head → tail; backward chains end at a topic entity as the tail
of their last triple and grow right to left. A path is extended only to an endpoint not yet
reached from the same topic entity (the ``vis`` set, one per direction), up to ``length``
triples (L = 2 by default; None: unbounded). Choices where the paper is silent:

- only maximal chains are kept (a chain that is a prefix of another adds nothing);
- retrieved triples that no chain reaches are kept as one-triple chains after the rest,
  so the reorganised context holds every retrieved triple;
- multi-answer merging: chains with the same root, relation path and intermediate
  entities but different end entities become one, the ends written ``a; b; c``. Unnamed
  intermediates (Freebase ``m.`` ids, the CVT nodes) do not keep chains apart: they are
  written as the first chain's;
- multi-entity merging (more than one topic entity): chains from different roots whose end
  sets overlap are placed next to each other and keep only the shared ends.

Chains keep the order of their first triple in the retrieval ranking.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kgrag.kg.graph import textless

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Chain:
    """A chain read from its topic entity ``root``: ``relations`` in that order, the
    entities between (``middles``) and the end entities (several once merged). A backward
    chain is written in the triples' direction, ending at its root."""

    root: str
    relations: tuple[str, ...]
    middles: tuple[str, ...]
    ends: tuple[str, ...]
    forward: bool
    rank: int  # the best rank of its triples in the retrieval

    def text(self) -> str:
        entities = [self.root, *self.middles, "; ".join(self.ends)]
        if not self.forward:  # written head to tail: from the ends back to the root
            entities, relations = entities[::-1], self.relations[::-1]
        else:
            relations = self.relations
        parts = [entities[0]]
        for relation, entity in zip(relations, entities[1:]):
            parts += [f"→ [{relation}] →", entity]
        return " ".join(parts)


def _bfs(triples: Sequence[Triple], topics: set[str], length: int | None
         ) -> list[tuple[int, ...]]:
    """Algorithm 1 in one direction: triple-index paths whose first head is a topic entity."""
    by_head: dict[str, list[int]] = defaultdict(list)
    source: list[int] = []
    for i, (h, _, _) in enumerate(triples):
        (source if h in topics else by_head[h]).append(i)
    out, seen, visited = [], set(), set()
    queue: deque[tuple[int, ...]] = deque((i,) for i in source)
    while queue:
        path = queue.popleft()
        if path not in seen:
            seen.add(path)
            out.append(path)
        if length is not None and len(path) >= length:
            continue
        first, last = triples[path[0]][0], triples[path[-1]][2]
        for j in by_head[last]:
            if j not in path and (first, triples[j][2]) not in visited:
                queue.append(path + (j,))
                visited.add((first, triples[j][2]))
    maximal = {p[:k] for p in out for k in range(1, len(p))}
    return [p for p in out if p not in maximal]


def chains(triples: Sequence[Triple], topics: Sequence[str], length: int | None = 2
           ) -> list[Chain]:
    """The merged chains of retrieved ``triples`` (best first) from ``topics``."""
    topics_set = set(topics)
    found: list[Chain] = []
    covered: set[int] = set()
    for path in _bfs(triples, topics_set, length):
        steps = [triples[i] for i in path]
        found.append(Chain(steps[0][0], tuple(r for _, r, _ in steps),
                           tuple(t for _, _, t in steps[:-1]), (steps[-1][2],), True, min(path)))
        covered.update(path)
    reversed_triples = [(t, r, h) for h, r, t in triples]
    for path in _bfs(reversed_triples, topics_set, length):
        steps = [reversed_triples[i] for i in path]
        if len(steps) == 1 and steps[0][2] in topics_set and any(
                c.forward and c.relations == (steps[0][1],) and c.root == steps[0][2]
                for c in found):
            continue  # a triple between two topic entities is already a forward chain
        found.append(Chain(steps[0][0], tuple(r for _, r, _ in steps),
                           tuple(t for _, _, t in steps[:-1]), (steps[-1][2],), False, min(path)))
        covered.update(path)
    for i, (h, r, t) in enumerate(triples):
        if i not in covered:
            found.append(Chain(h, (r,), (), (t,), True, len(triples) + i))
    merged = _merge_answers(found)
    if len(topics_set) > 1:
        merged = _merge_entities(merged)
    return merged


def _merge_answers(found: list[Chain]) -> list[Chain]:
    groups: dict[tuple, Chain] = {}
    for chain in sorted(found, key=lambda c: c.rank):
        key = (chain.root, chain.relations, chain.forward,
               tuple(None if textless(m) else m for m in chain.middles))
        if key in groups:
            kept = groups[key]
            groups[key] = replace(kept, ends=tuple(dict.fromkeys(kept.ends + chain.ends)))
        else:
            groups[key] = chain
    return list(groups.values())


def _merge_entities(found: list[Chain]) -> list[Chain]:
    """Chains from different roots sharing end entities, side by side, with the shared
    ends only."""
    out: list[Chain] = []
    placed: set[int] = set()
    for i, chain in enumerate(found):
        if i in placed:
            continue
        group = [i] + [j for j in range(i + 1, len(found)) if j not in placed
                       and found[j].root != chain.root
                       and set(found[j].ends) & set(chain.ends)]
        shared = set(chain.ends)
        for j in group[1:]:
            shared &= set(found[j].ends)
        if len(group) > 1 and shared:
            out += [replace(found[j], ends=tuple(e for e in found[j].ends if e in shared))
                    for j in group]
            placed.update(group)
        else:
            out.append(chain)
            placed.add(i)
    return out


def chain_context(triples: Sequence[Triple], topics: Sequence[str], length: int | None = 2
                  ) -> str:
    """The chains written for the answer prompt, one per line: ``Chain i. …``."""
    return "\n".join(f"Chain {i}. {c.text()}"
                     for i, c in enumerate(chains(triples, topics, length), start=1))


def flat_context(triples: Sequence[Triple]) -> str:
    """The triples as they are, one per line: ``(head, relation, tail)``."""
    return "\n".join(f"({h}, {r}, {t})" for h, r, t in triples)
