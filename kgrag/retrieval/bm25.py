"""Strategy ``bm25``: lexical top chunks (bm25s), filled greedily up to the token budget.

The lexical baseline beside dense retrieval: a graph method only counts as a gain
against the better of the two and their fusion at the same budget. The index is
the rendered unit text (title and text, what dense retrieval embeds), lower-cased,
split into words of two or more characters, English stop words removed and no
stemming (bm25s's defaults without a stemmer package). bm25s's Lucene variant
(k1 = 1.5, b = 0.75). Building it takes about a second on 3,000 chunks, so it is
built when the strategy loads rather than kept as an artefact.

The strategy's context is its ranking filled into the budget (``fill_budget``), but
the ranking is sorted only as far as the fill reads it (``Bm25Index.filled``,
``kgrag.retrieval.budget.filled_best``): at a million chunks, a common word scores a
quarter of them, and sorting and naming every scored unit cost a question several times
its scoring.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.declarations import Strategy
from kgrag.retrieval.budget import LazyRanking, filled_best
from kgrag.retrieval.units import Evidence, Units

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG

class Bm25Index:
    """BM25 scores of every unit for a question."""

    def __init__(self, units: Units) -> None:
        import bm25s  # imported when an index is built: with it comes scipy
        from bm25s.tokenization import Tokenizer as WordSplitter

        self.ids = list(units.text)
        self.tokens = units.tokens
        self.sizes = np.array([units.tokens[i] for i in self.ids])
        # picked by an index array in one step: a list built id by id cost a common
        # word's question more than its scoring and sorting at a million chunks
        self.id_array = np.array(self.ids, dtype=object)
        self.words = WordSplitter(stopwords="english")
        # Word ids, not strings: the splitter's vocabulary is then the index's, and a
        # question's ids index it directly. The texts are read one by one as they are split
        # (``Units`` reads them from a file), never all held at once.
        texts = (units.text[i] for i in self.ids)
        corpus = self.words.tokenize(texts,  # type: ignore[arg-type]  # it only iterates them
                                     length=len(self.ids), return_as="tuple",
                                     show_progress=False)
        self.index = bm25s.BM25()
        self.index.index(corpus, show_progress=False)

    def scores(self, question: str) -> np.ndarray:
        """One score per unit (0 where no question word occurs); words the corpus lacks
        are ignored. bm25s keeps each word's postings (units and their BM25 terms) as a
        column of a sparse matrix; a question touches only its words' columns. Each
        column names a unit once, so adding it by fancy index sums exactly what bm25s's
        ``np.add.at`` sums, in the same order, at a tenth of its cost for a common word
        of a million chunks."""
        words = self.words.tokenize([question], update_vocab=False, return_as="ids",
                                    show_progress=False)[0]
        postings = self.index.scores
        scores = np.zeros(postings["num_docs"], dtype=self.index.dtype)
        for word in words:
            start, end = postings["indptr"][word], postings["indptr"][word + 1]
            scores[postings["indices"][start:end]] += postings["data"][start:end]
        return scores

    def ranked(self, question: str) -> list[str]:
        """Units sharing a word with the question, best first; ties in unit order. Only
        the scored units are sorted: at a million chunks, sorting every score cost a
        question more than scoring it."""
        scores = self.scores(question)
        scored = np.flatnonzero(scores > 0)
        order = scored[np.argsort(-scores[scored], kind="stable")]
        return self.id_array[order].tolist()

    @functools.cached_property
    def position(self) -> dict[str, int]:
        """Each unit's position (fusion asks for the rank of units another member names)."""
        return {unit: i for i, unit in enumerate(self.ids)}

    def reading(self, question: str) -> LazyRanking:
        """``ranked(question)``, sorted only as far as it is read (what fusion reads)."""
        scores = self.scores(question)
        return LazyRanking([], scores, np.flatnonzero(scores > 0), self.id_array, self.sizes,
                           self.position)

    def filled(self, question: str, budget: int) -> list[str]:
        """The units ``fill_budget`` takes from ``ranked(question)`` into ``budget``, the
        ranking sorted only as far as the fill reads it (``filled_best``)."""
        scores = self.scores(question)
        return filled_best(scores, np.flatnonzero(scores > 0), self.id_array, self.sizes,
                           self.tokens, budget)


class Bm25Strategy:
    """BM25 over the chunks: needs no index step, only the chunks themselves."""

    def __init__(self, index: Bm25Index, units: Units, budget: int) -> None:
        self.index, self.units, self.budget = index, units, budget

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> Bm25Strategy:
        return cls(Bm25Index(resources.chunks), resources.chunks, config["budget_tokens"])

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return self.index.ranked(question)

    def reading(self, question: str, vector: np.ndarray) -> LazyRanking:
        return self.index.reading(question)

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        """``units.filled(ranking)``, the ranking sorted only as far as the fill reads it."""
        return self.units.context(self.index.filled(question, self.budget))


DECLARATION = Strategy("bm25", "lexical top chunks (BM25) in the budget.", (), Bm25Strategy,
                       lambda config: {})
