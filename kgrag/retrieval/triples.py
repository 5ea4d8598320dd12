"""Strategies over a knowledge graph's triples (KGQA): each ranks the triples of a
question's retrieval graph (the k-hop neighbourhood of its topic entities, from the ``kg``
artefact) and hands the best to the LLM.

- ``triple_cosine``: cosine of the question's and each triple's text embedding (untrained);
- ``triple_bm25``: BM25 of the question over the triples' text (untrained; kgrag's BM25);
- ``reg``: a trained ReG retriever, named by its training entry (``retriever``): the
  SubgraphRAG triple scorer (``level: triple``) or the PNA entity scorer (``level:
  entity``, a triple scoring p(head) + p(tail)).

Every one ranks up to ``ranked`` triples (what ``recall@k`` reads: the evidence's ids are
triple ids, the corpus's documents) and fills the context with the best triples whose flat
rendering fits ``budget_tokens``, written flat (``(head, relation, tail)`` lines) or as
ReG's reasoning chains (``context: chains``, ``kgrag.kg.chains``). A question with no topic
entity in the graph has an empty retrieval graph: nothing is retrieved (counted as a
fallback).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.contents.kg import KgIndex, Retrieval
from kgrag.declarations import Param, Strategy, TrainedRef
from kgrag.kg.chains import chain_context, flat_context
from kgrag.limits import ITEMS_MAX, ROUNDS_MAX
from kgrag.retrieval.bm25 import Bm25Index
from kgrag.retrieval.units import Evidence, Units
from kgrag.training.reg import load_scorer

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

KG = {"kg": "kg"}
PARAMS = (
    Param("ranked", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "triples ranked per question (recall@k reads the first k).", default=200),
    Param("context", {"enum": ["flat", "chains"]},
          "how the retrieved triples reach the LLM: flat '(head, relation, tail)' lines, or "
          "ReG's reasoning chains from the topic entities ('Chain i. e0 → [r1] → e1 …').",
          default="flat"),
    Param("chain_length", {"type": ["integer", "null"], "minimum": 1, "maximum": ROUNDS_MAX},
          "L, the longest chain in triples (context: chains); null: unbounded.", default=2),
)


class TripleStrategy:
    """Ranks a question's retrieval-graph triples by ``scores``; subclasses score."""

    def __init__(self, index: KgIndex, config: dict[str, Any], resources: Resources) -> None:
        self.index, self.config, self.tokenizer = index, config, resources.tokenizer
        self.tokens = resources.tokenizer.count_many(
            [flat_context([index.kg.triple(i)]) for i in range(len(index.kg.ids))])

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> TripleStrategy:
        return cls(KgIndex(artefacts["kg"]), config, resources)

    def scores(self, question: str, vector: np.ndarray, retrieval: Retrieval) -> np.ndarray:
        raise NotImplementedError

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        retrieval = self.index.of_text(question)
        if not len(retrieval.triples):
            return Evidence([], [], "", 0, trace={"fallback": "no topic entity in the graph"})
        scores = self.scores(question, vector, retrieval)
        order = np.argsort(-scores, kind="stable")[:self.config["ranked"]]
        ranked = [int(retrieval.triples[i]) for i in order]
        kept, used = [], 0
        for i in ranked:
            if used + self.tokens[i] > self.config["budget_tokens"]:
                break
            kept.append(i)
            used += self.tokens[i]
        triples = [self.index.kg.triple(i) for i in kept]
        if self.config["context"] == "chains":
            topics = [self.index.kg.entities[e] for e in retrieval.topics]
            text = chain_context(triples, topics, self.config["chain_length"])
        else:
            text = flat_context(triples)
        ids = [self.index.kg.ids[i] for i in ranked]
        return Evidence(ids, ids, text, self.tokenizer.count(text),
                        trace={"context_triples": len(kept)})


class CosineTriples(TripleStrategy):
    """Cosine of the question and the triple text embeddings."""

    def scores(self, question: str, vector: np.ndarray, retrieval: Retrieval) -> np.ndarray:
        return self.index.cosines(retrieval.triples, vector)


class Bm25Triples(TripleStrategy):
    """BM25 over the triple texts of the whole graph, read for the question's triples."""

    def __init__(self, index: KgIndex, config: dict[str, Any], resources: Resources) -> None:
        super().__init__(index, config, resources)
        ids = index.kg.ids
        self.bm25 = Bm25Index(Units(dict(zip(ids, index.texts)), dict.fromkeys(ids, 0),
                                    dict(zip(ids, ids))))

    def scores(self, question: str, vector: np.ndarray, retrieval: Retrieval) -> np.ndarray:
        return self.bm25.scores(question)[retrieval.triples]


class TrainedTriples(TripleStrategy):
    """A trained ReG retriever's scores over the question's graph."""

    def __init__(self, index: KgIndex, config: dict[str, Any], resources: Resources,
                 scorer: Any) -> None:
        super().__init__(index, config, resources)
        self.scorer = scorer

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> TrainedTriples:
        return cls(KgIndex(artefacts["kg"]), config, resources,
                   load_scorer(config["level"], artefacts["retriever"]))

    def scores(self, question: str, vector: np.ndarray, retrieval: Retrieval) -> np.ndarray:
        return self.scorer.scores(self.index.question_graph(retrieval, vector))


def _trained(config: dict[str, Any]) -> dict[str, Any]:
    return {**KG, "retriever": TrainedRef("retriever", f"{config['level']}_scorer",
                                          "it ranks triples with a trained ReG retriever")}


COSINE = Strategy("triple_cosine", "KGQA: the question's graph triples by embedding cosine "
                  "(untrained baseline).", PARAMS, CosineTriples, lambda config: dict(KG),
                  evidence="triples")
BM25 = Strategy("triple_bm25", "KGQA: the question's graph triples by BM25 over their text "
                "(untrained baseline).", PARAMS, Bm25Triples, lambda config: dict(KG),
                evidence="triples")
REG = Strategy("reg", "KGQA: the question's graph triples ranked by a trained ReG retriever "
               "(SubgraphRAG's triple scorer or a PNA entity scorer).", (
    Param("retriever", {"type": "string", "minLength": 1},
          "the training entry (method reg_triple or reg_entity) whose model ranks the "
          "triples."),
    Param("level", {"enum": ["triple", "entity"]},
          "triple: the entry trains a triple scorer (reg_triple); entity: an entity scorer "
          "(reg_entity), a triple scoring p(head) + p(tail).", default="triple"),
    *PARAMS), TrainedTriples, _trained, evidence="triples")
DECLARATIONS = (COSINE, BM25, REG)
