"""The multi-hop benchmarks: MuSiQue, HotpotQA (distractor setting) and 2WikiMultihopQA.

Each line is one question that brings its own paragraphs, the gold ones marked;
the corpus is the selected questions' paragraphs, deduplicated. 2Wiki's gold
facts (``evidences``) also fill ``Corpus.triples``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgrag.corpus.corpus import Corpus
from kgrag.corpus.importers.records import (
    QuestionRecord,
    get_field,
    get_items,
    get_strings,
    question_corpus,
    question_record,
    read_jsonl,
    require_text,
    select_questions,
)
from kgrag.errors import KgragError


def import_musique(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """MuSiQue: each line brings its 20 paragraphs; ``is_supporting`` marks the gold ones.
    Each step of a ``question_decomposition`` names the paragraph it is answered from,
    which must be one of the line's; its sub-question and answer are kept (RAS's oracle
    planner reads them)."""
    records = []
    for lineno, record in read_jsonl(path):
        where = f"{path}:{lineno}"
        paragraphs = []
        supporting = []
        indices = []
        listed = get_items(record, "paragraphs", where, "the paragraphs it is asked over")
        for at, paragraph in enumerate(listed):
            if not isinstance(paragraph, dict):
                raise KgragError(f"{where}: each entry of 'paragraphs' must be an object")
            pair = (
                get_field(paragraph, "title", str, where),
                get_field(paragraph, "paragraph_text", str, where),
            )
            paragraphs.append(pair)
            if get_field(paragraph, "is_supporting", bool, where):
                supporting.append(pair)
            indices.append(get_field(paragraph, "idx", int, f"{where}: paragraphs[{at}]")
                           if "idx" in paragraph else at)
        require_text(paragraphs, "paragraphs", where)
        steps = _decomposition(record, indices, where)
        aliases = get_strings(record, "answer_aliases", where) if "answer_aliases" in record else []
        records.append(replace(question_record(lineno, record, where, "id", paragraphs,
                                               supporting, aliases=aliases),
                               decomposition=steps))
    return question_corpus(select_questions(records, cfg, path))


def _decomposition(record: Mapping[str, Any], indices: list[int], where: str
                   ) -> tuple[tuple[str, str], ...]:
    """The question's decomposition as (sub-question, answer) pairs, in order. Every
    ``paragraph_support_idx`` is an integer naming one of its paragraphs (by their
    ``idx``): a step answered from no paragraph, or from a paragraph ``3.0`` only seems to
    name, is a broken line."""
    steps = record.get("question_decomposition", [])
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise KgragError(f"{where}: 'question_decomposition' must be a list of objects")
    for number, step in enumerate(steps):
        at = f"{where}: question_decomposition[{number}]"
        named = get_field(step, "paragraph_support_idx", int, at)
        if named not in indices:
            raise KgragError(f"{at}: paragraph_support_idx {named} names none of the line's "
                             f"{len(indices)} paragraphs (by their 'idx')")
    return tuple((get_field(step, "question", str, f"{where}: question_decomposition[{number}]"),
                  get_field(step, "answer", str, f"{where}: question_decomposition[{number}]"))
                 for number, step in enumerate(steps))


def import_hotpotqa(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """HotpotQA (distractor setting): ``context`` paragraphs, gold titles in ``supporting_facts``."""
    records = [_context_question(lineno, record, path) for lineno, record in read_jsonl(path)]
    return question_corpus(select_questions(records, cfg, path))


def import_2wiki(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """2WikiMultihopQA: same shape as HotpotQA, plus gold triples (``evidences``).

    Lines without a ``context`` are skipped: some public copies (including
    the shared sample, 36 of 200 lines) replace it with generated
    explanations, and such a question has no paragraphs to retrieve.
    """
    records = [
        _context_question(lineno, record, path)
        for lineno, record in read_jsonl(path)
        if "context" in record
    ]
    return question_corpus(select_questions(records, cfg, path))


def _context_question(lineno: int, record: Mapping[str, Any], path: Path) -> QuestionRecord:
    """Parse one HotpotQA / 2Wiki line: [title, [sentences]] paragraphs, supporting by title."""
    where = f"{path}:{lineno}"
    gold_titles = set()
    for fact in get_field(record, "supporting_facts", list, where):
        if not (isinstance(fact, list) and fact and isinstance(fact[0], str)):
            raise KgragError(f"{where}: 'supporting_facts' entries must be [title, sentence_index]")
        gold_titles.add(fact[0])
    paragraphs = []
    for entry in get_items(record, "context", where, "the paragraphs it is asked over"):
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], list)
            and all(isinstance(sentence, str) for sentence in entry[1])
        ):
            raise KgragError(f"{where}: 'context' entries must be [title, [sentences]]")
        paragraphs.append((entry[0], _join_sentences(entry[1])))
    require_text(paragraphs, "context", where)
    question = question_record(lineno, record, where, "_id", paragraphs,
                               (pair for pair in paragraphs if pair[0] in gold_titles))
    return replace(question, triples=_evidences(record, where))


def _evidences(record: Mapping[str, Any], where: str) -> tuple[tuple[str, str, str], ...]:
    """2Wiki's gold facts, ``[subject, relation, object]`` each; none when absent (HotpotQA)."""
    triples = []
    for entry in record.get("evidences", []):
        if not (isinstance(entry, list) and len(entry) == 3
                and all(isinstance(part, str) for part in entry)):
            raise KgragError(f"{where}: 'evidences' entries must be [subject, relation, object]")
        triples.append((entry[0], entry[1], entry[2]))
    return tuple(triples)


def _join_sentences(sentences: list[str]) -> str:
    """Join sentences with single spaces whatever spacing they carry.

    HotpotQA sentences keep their own leading spaces and both datasets have
    stray double spaces; collapsing all whitespace gives one clean paragraph.
    """
    return " ".join(" ".join(sentences).split())

