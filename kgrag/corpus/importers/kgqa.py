"""KGQA over a knowledge graph (WebQSP's shape, ``../shared/data/kgqa_webqsp.jsonl``).

Each line is one question with its ``answers``, ``topic_entities`` (entity names) and
``gold_triples`` ([head, relation, tail] each). The knowledge graph is the union of the
gold triples of every line of the file, whichever questions are selected, so a quick run
on the first N questions retrieves among the same distractors as the full one. The
triples are the corpus's documents too (id ``t`` + a hash of the triple, text
``head relation tail``), which makes a question's gold triples its supporting documents
and ``recall@k`` the gold-triple recall among the first k triples retrieved. A question whose
answers are all null (an answer entity without a name; 37 lines of the WebQSP sample) has
nothing to match an answer against: it is skipped with a warning that counts them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.corpus.corpus import (
    DOCUMENT_SCHEMA,
    KG_SCHEMA,
    QUESTION_SCHEMA,
    TOPIC_SCHEMA,
    TRIPLE_SCHEMA,
    Corpus,
)
from kgrag.corpus.importers.records import (
    QuestionRecord,
    clean_answers,
    get_field,
    get_question,
    get_strings,
    read_jsonl,
    select_questions,
)
from kgrag.errors import KgragError

Triple = tuple[str, str, str]
log = logging.getLogger(__name__)


def triple_id(triple: Triple) -> str:
    """A triple's id, from its content (stable across selections, like document ids)."""
    return "t" + hashlib.sha1("\0".join(triple).encode()).hexdigest()[:12]


def triple_text(triple: Triple) -> str:
    """How a triple reads as one line of text (what is embedded and searched)."""
    return " ".join(triple)


def _triples(record: Mapping[str, Any], where: str) -> tuple[Triple, ...]:
    triples = []
    for entry in get_field(record, "gold_triples", list, where):
        if not (isinstance(entry, list) and len(entry) == 3
                and all(isinstance(part, str) and part.strip() for part in entry)):
            raise KgragError(f"{where}: 'gold_triples' entries must be [head, relation, tail], "
                             "three non-empty strings")
        triples.append((entry[0], entry[1], entry[2]))
    return tuple(triples)


def import_kgqa(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """The knowledge graph of the whole file and the selected questions, with their
    answers, topic entities and gold triples."""
    kg: dict[Triple, str]  # every triple of the file → its id
    records, topics, kg, unnamed = [], {}, {}, []
    for lineno, record in read_jsonl(path):
        where = f"{path}:{lineno}"
        qid = get_field(record, "id", str, where)
        question = get_question(record, where)
        raw = get_field(record, "answers", list, where)
        if not all(a is None or isinstance(a, str) for a in raw):
            raise KgragError(f"{where}: field 'answers' must be a list of strings")
        answers = clean_answers(a for a in raw if a is not None)
        triples = _triples(record, where)
        for triple in triples:
            kg.setdefault(triple, triple_id(triple))
        if not answers:  # an unnamed answer entity (null in WebQSP): nothing to match
            unnamed.append(qid)
            continue
        topics[qid] = tuple(dict.fromkeys(get_strings(record, "topic_entities", where)))
        records.append(QuestionRecord(lineno, qid, question, answers, (), (),
                                      triples=triples))
    if unnamed:
        log.warning("%s: %d questions have no named answer (null answers) and are skipped, "
                    "their triples kept in the graph: %s", path.name, len(unnamed),
                    ", ".join(unnamed[:5]) + (" …" if len(unnamed) > 5 else ""))
    selected = select_questions(records, cfg, path)
    documents = pl.DataFrame({"doc_id": list(kg.values()), "title": [t[0] for t in kg],
                              "text": [triple_text(t) for t in kg]}, schema=DOCUMENT_SCHEMA)
    questions = pl.DataFrame(
        {"question_id": [r.question_id for r in selected],
         "question": [r.question for r in selected],
         "answers": [list(r.answers) for r in selected],
         "supporting_doc_ids": [list(dict.fromkeys(kg[t] for t in r.triples))
                                for r in selected],
         "gold_sentence_ids": [[] for _ in selected]}, schema=QUESTION_SCHEMA)
    gold = pl.DataFrame([(r.question_id, *t) for r in selected for t in r.triples],
                        schema=TRIPLE_SCHEMA, orient="row")
    return Corpus(
        documents=documents, questions=questions, triples=gold,
        kg=pl.DataFrame([(i, *t) for t, i in kg.items()], schema=KG_SCHEMA, orient="row"),
        topics=pl.DataFrame([(r.question_id, e) for r in selected for e in topics[r.question_id]],
                            schema=TOPIC_SCHEMA, orient="row"))
