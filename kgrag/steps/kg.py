"""Step ``kg_index``: a KGQA corpus's knowledge graph, embedded, and every question's
retrieval graph (the ``hops``-hop neighbourhood of its topic entities) → the ``kg``
artefact (``kgrag.contents.kg``).

A topic entity that is not in the graph is recorded per question and counted in the
notes; a question with none in the graph keeps an empty retrieval graph (its strategies
retrieve nothing for it), counted too. ``graph_triples`` (absent: none) pads every
question's retrieval graph to that many triples with distractors
(``kgrag.kg.graph.with_distractors``): the retrieval graphs of the other questions, the
most similar question (by question embedding) first. Those are real facts around the
topics that similar questions ask about, the question's own relations about other
entities, as a real KG's wider neighbourhood holds them: hard for a ranker that reads text
alone, so depth stops being free (a harder test bed). The 3-hop graphs of the shared
WebQSP sample are so small that cosine ranks nearly every reachable gold triple within
its first 100.
"""

from __future__ import annotations

import numpy as np

from kgrag.contents.corpus import read_kg, read_questions
from kgrag.contents.kg import write_kg
from kgrag.kg.graph import KnowledgeGraph, with_distractors
from kgrag.steps.step import StepContext, step_kind


@step_kind("kg_index", "1")
def kg_index(ctx: StepContext) -> None:
    triples, topics = read_kg(ctx.input("corpus"))
    kg = KnowledgeGraph(triples["triple_id"], triples["head"], triples["relation"],
                        triples["tail"])
    embedder = ctx.models.embedder_of(ctx.config["embedder"])
    texts = {"entities": kg.entities, "relations": kg.relations,
             "triples": [" ".join(kg.triple(i)) for i in range(len(kg.ids))]}
    vectors = {table: embedder.encode(list(items)) for table, items in texts.items()}
    questions = read_questions(ctx.input("corpus"))
    vectors["questions"] = embedder.encode(questions["question"].to_list())
    named: dict[str, list[str]] = {}
    for qid, entity in topics.iter_rows():
        named.setdefault(qid, []).append(entity)
    rows, layered = [], []
    for qid, question in questions.select("question_id", "question").iter_rows():
        names = named.get(qid, [])
        found = [e for e in names if e in kg.entity_index]
        layered.append([i for layer in kg.layers([kg.entity_index[e] for e in found],
                                                  ctx.config["hops"]) for i in layer])
        rows.append({"question_id": qid, "question": question, "topics": found,
                     "missing": [e for e in names if e not in kg.entity_index],
                     "triples": sorted(layered[-1])})
    size = ctx.config.get("graph_triples")
    for n, row in enumerate(rows):
        if size and row["topics"]:  # a question without a topic entity keeps no graph
            nearest = np.argsort(-(vectors["questions"] @ vectors["questions"][n]),
                                 kind="stable")
            row["triples"] = with_distractors(
                row["triples"], (layered[m] for m in nearest if m != n), size).tolist()
    sizes = [len(r["triples"]) for r in rows]
    write_kg(ctx.out_dir, kg, vectors, rows)
    ctx.notes.update(
        triples=len(kg.ids), entities=len(kg.entities), relations=len(kg.relations),
        missing_topic_entities=sum(len(r["missing"]) for r in rows),
        questions_without_topic=sum(not r["topics"] for r in rows),
        graph_triples_mean=round(float(np.mean(sizes)), 2) if sizes else 0,
        graph_triples_max=max(sizes, default=0))
