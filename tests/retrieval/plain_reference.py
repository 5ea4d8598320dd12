"""The plain phrase–passage PageRank reference that kgrag's ``ppr`` must beat.

Written apart from kgrag's graph search on purpose (its own spaCy rules, graph and
power iteration), so that it is a reference and not a copy of the code it judges:

* phrases: spaCy named entities other than dates, times and numbers; noun chunks
  whose root is a proper noun or that hold a named entity; and each passage's title;
* a passage–phrase graph with unweighted edges and no relationship edges;
* seeds: the question's phrases (the same rules) and every passage title the
  question names, each weighted by 1 / (passages containing it);
* personalised PageRank, damping 0.5, 30 iterations, passages ranked by mass (ties,
  and passages without mass, in corpus order).

``rank`` returns document ids best first; a question with no seed gets an empty
ranking (its recall counts as 0), and ``PlainReference.unseeded`` counts those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

NOT_PHRASES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "PERCENT", "MONEY",
                         "QUANTITY"})
LEADING = re.compile(r"^(the|a|an|his|her|its|their)\s+")


def phrase_key(text: str) -> str:
    """Lower case, single spaces, no leading article or possessive pronoun."""
    key = " ".join(re.findall(r"\w+", text.casefold()))
    return LEADING.sub("", key)


def title_key(title: str) -> str:
    return phrase_key(title.split(" (", 1)[0] if title.endswith(")") else title)


def phrases(doc) -> set[str]:
    """The phrases of one parsed text (see the module docstring)."""
    found = {phrase_key(e.text) for e in doc.ents if e.label_ not in NOT_PHRASES}
    entity_tokens = {i for e in doc.ents if e.label_ not in NOT_PHRASES
                     for i in range(e.start, e.end)}
    for chunk in doc.noun_chunks:
        if chunk.root.pos_ == "PROPN" or any(i in entity_tokens
                                             for i in range(chunk.start, chunk.end)):
            found.add(phrase_key(chunk.text))
    return {p for p in found if p}


class PlainReference:
    """The reference's graph over one corpus, ready to rank passages for questions."""

    def __init__(self, nlp, doc_ids: list[str], titles: list[str], texts: list[str],
                 batch_size: int = 64) -> None:
        self.nlp, self.doc_ids = nlp, doc_ids
        phrase_index: dict[str, int] = {}
        edges: set[tuple[int, int]] = set()
        for d, (title, doc) in enumerate(zip(titles, nlp.pipe(texts, batch_size=batch_size))):
            found = phrases(doc) | ({title_key(title)} if title else set())
            for p in found - {""}:
                edges.add((phrase_index.setdefault(p, len(phrase_index)), d))
        self.phrases = phrase_index
        self.titles = {title_key(t): phrase_index[title_key(t)] for t in titles
                       if t and title_key(t) in phrase_index}
        n_p, n_d = len(phrase_index), len(doc_ids)
        rows = [p for p, _ in edges]
        cols = [n_p + d for _, d in edges]
        upper = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_p + n_d,) * 2)
        adjacency = (upper + upper.T).tocsr()
        degree = np.asarray(adjacency.sum(axis=1)).ravel()
        self.passages = np.bincount(np.array(rows, dtype=np.int64), minlength=n_p)
        scale = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
        self.step = (sp.diags(scale) @ adjacency).T.tocsr()
        self.unseeded = 0

    def seeds(self, question: str) -> dict[int, float]:
        """Phrase node → restart weight, 1 / (passages containing the phrase)."""
        named = phrases(self.nlp(question)) & self.phrases.keys()
        words = f" {phrase_key(question)} "
        named |= {t for t in self.titles if f" {t} " in words}
        return {self.phrases[p]: 1.0 / max(1, self.passages[self.phrases[p]]) for p in named}

    def rank(self, question: str, damping: float = 0.5, steps: int = 30) -> list[str]:
        seeds = self.seeds(question)
        if not seeds:
            self.unseeded += 1
            return []
        restart = np.zeros(self.step.shape[0])
        for node, weight in seeds.items():
            restart[node] = weight
        restart /= restart.sum()
        mass = restart.copy()
        for _ in range(steps):
            mass = damping * (self.step @ mass) + (1 - damping) * restart
        passage_mass = mass[len(self.phrases):]
        order = np.lexsort((np.arange(len(passage_mass)), -passage_mass))
        return [self.doc_ids[d] for d in order]


def recall_at(ranked: list[str], gold: Iterable[str], k: int) -> float:
    gold = set(gold)
    return len(set(ranked[:k]) & gold) / len(gold)
