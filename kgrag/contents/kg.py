"""The ``kg`` artefact (step ``kg_index``): a KGQA corpus's knowledge graph embedded and
split into each question's retrieval graph.

``triples.parquet`` (``triple_id``, ``head``, ``relation``, ``tail``), ``graph.graphml``
(the same graph for networkx / igraph), LanceDB tables ``entities``, ``relations`` and
``triples`` (the name, relation-text and triple-text vectors of the spec's embedder),
``questions`` (the question vectors, which training reads) and
``questions.parquet``: per question its topic entities found in the graph (``topics``),
those that are not (``missing``) and its retrieval graph's triples (``triples``, row
numbers of ``triples.parquet``). ``KgIndex`` reads it all back for strategies and
training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kgrag.contents.columns import ColumnTypes
from kgrag.errors import KgragError
from kgrag.kg.graph import KnowledgeGraph, textless
from kgrag.kg.question_graph import QuestionGraph
from kgrag.store.vectors import VectorTable

TRIPLES = "triples.parquet"
QUESTIONS = "questions.parquet"
GRAPHML = "graph.graphml"
VECTORS = "vectors"  # the LanceDB folder
QUESTION_SCHEMA: ColumnTypes = {"question_id": pl.String, "question": pl.String,
                                "topics": pl.List(pl.String), "missing": pl.List(pl.String),
                                "triples": pl.List(pl.Int64)}


def write_kg(folder: Path, kg: KnowledgeGraph, vectors: dict[str, np.ndarray],
             questions: list[dict[str, Any]]) -> None:
    pl.DataFrame({"triple_id": kg.ids, **{c: [kg.triple(i)[j] for i in range(len(kg.ids))]
                                          for j, c in enumerate(("head", "relation", "tail"))}}
                 ).write_parquet(folder / TRIPLES)
    kg.write_graphml(folder / GRAPHML)
    names = {"entities": kg.entities, "relations": kg.relations, "triples": kg.ids,
             "questions": [q["question_id"] for q in questions]}
    for table, ids in names.items():
        if ids:
            VectorTable.create(folder / VECTORS, table, ids, vectors[table])
    pl.DataFrame(questions, schema=QUESTION_SCHEMA).write_parquet(folder / QUESTIONS)


@dataclass(frozen=True)
class Retrieval:
    """One question's retrieval graph: its triples (row numbers in the graph) and its
    topic entities (entity numbers)."""

    triples: np.ndarray
    topics: np.ndarray


class KgIndex:
    """The ``kg`` artefact in memory: the graph, its vectors and every question's
    retrieval graph (by question id and by question text)."""

    def __init__(self, folder: Path) -> None:
        frame = pl.read_parquet(folder / TRIPLES)
        self.kg = KnowledgeGraph(frame["triple_id"], frame["head"], frame["relation"],
                                 frame["tail"])
        self.vectors: dict[str, np.ndarray] = {}
        for table, ids in (("entities", self.kg.entities), ("relations", self.kg.relations),
                           ("triples", self.kg.ids)):
            stored, matrix = VectorTable.open(folder / VECTORS, table).matrix()
            if stored != ids:
                raise KgragError(f"{folder.name}: vector table {table} is out of step with "
                                 "the graph; rerun the kg step with --force")
            self.vectors[table] = matrix
        self.textless = np.array([textless(e) for e in self.kg.entities])
        self.texts = [" ".join(self.kg.triple(i)) for i in range(len(self.kg.ids))]
        questions = pl.read_parquet(folder / QUESTIONS)
        self.by_id: dict[str, Retrieval] = {}
        self.by_text: dict[str, Retrieval] = {}
        for qid, text, topics, triples in questions.select(
                "question_id", "question", "topics", "triples").iter_rows():
            found = Retrieval(np.array(triples, dtype=np.int64),
                              np.array([self.kg.entity_index[e] for e in topics], dtype=np.int64))
            self.by_id[qid] = found
            self.by_text[text] = found
        self.folder = folder

    def question_vectors(self) -> dict[str, np.ndarray]:
        """Question id → its vector (what training reads; retrieval embeds its own)."""
        ids, matrix = VectorTable.open(self.folder / VECTORS, "questions").matrix()
        return dict(zip(ids, matrix))

    def of_text(self, question: str) -> Retrieval:
        """A question's retrieval graph, by its text (what a strategy is handed)."""
        found = self.by_text.get(question)
        if found is None:
            raise KgragError(f"question {question[:60]!r} is not in the kg artefact; rerun "
                             "the kg step")
        return found

    def cosines(self, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
        """Each triple's cosine to the question ``vector`` over its text embedding (both
        normalised): what ``triple_cosine`` ranks by and the triple scorer's match input."""
        cosines: np.ndarray = self.vectors["triples"][rows] @ np.asarray(vector, dtype=np.float32)
        return cosines

    def question_graph(self, retrieval: Retrieval, vector: np.ndarray,
                       positives: set[int] | None = None) -> QuestionGraph:
        """A retrieval graph as the scorers' arrays, its entities and relations numbered
        locally; ``positives`` (graph triple numbers) become 0/1 labels."""
        rows = retrieval.triples
        heads, tails = self.kg.head[rows], self.kg.tail[rows]
        entities, local = np.unique(np.concatenate([heads, tails, retrieval.topics]),
                                    return_inverse=True)
        relations, rel_local = np.unique(self.kg.relation[rows], return_inverse=True)
        n = len(rows)
        labels = None if positives is None else np.array(
            [float(int(r) in positives) for r in rows], dtype=np.float32)
        return QuestionGraph(
            question=np.asarray(vector, dtype=np.float32),
            entities=self.vectors["entities"][entities], textless=self.textless[entities],
            relations=self.vectors["relations"][relations],
            head=local[:n].astype(np.int64), relation=rel_local.astype(np.int64),
            tail=local[n:2 * n].astype(np.int64), topic=local[2 * n:].astype(np.int64),
            labels=labels,
            similarity=self.cosines(rows, vector))
