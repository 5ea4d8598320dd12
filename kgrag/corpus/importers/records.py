"""What every importer shares: the question record, strict JSON Lines reading, field
checks with file:line errors, question selection and the corpus frames.

Importers parse their lines into ``QuestionRecord``s and leave selection, document
deduplication and id derivation to the helpers here, so every dataset selects and
reports alike.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from kgrag.corpus.corpus import (
    DECOMPOSITION_SCHEMA,
    DOCUMENT_SCHEMA,
    QUESTION_SCHEMA,
    TRIPLE_SCHEMA,
    Corpus,
    make_doc_id,
)
from kgrag.errors import KgragError

_JSON_KIND = {
    str: "a string",
    list: "a list",
    dict: "an object",
    bool: "true or false",
    int: "an integer",
}

T = TypeVar("T")

# Where a line may hold a lone surrogate: an escape of one (``\ud800``) or one encoded as
# UTF-8 bytes, which Python's JSON reader lets through. A pair of escapes matches too (it
# decodes to one character), so a match only says the line is worth a closer look.
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class QuestionRecord:
    """One benchmark question with the paragraphs it contributes to the corpus.

    ``paragraphs`` and ``supporting`` are (title, text) pairs; ids are derived
    only when the corpus is assembled, after selection, so documents of
    questions that were not selected never enter the corpus.
    ``gold_sentence_ids`` is filled only by datasets with sentence-level gold,
    ``triples`` (subject, relation, object) only by datasets with gold facts,
    ``decomposition`` (sub-question, its answer) only by datasets that decompose their
    questions.
    """

    line: int
    question_id: str
    question: str
    answers: tuple[str, ...]
    paragraphs: tuple[tuple[str, str], ...]
    supporting: tuple[tuple[str, str], ...]
    gold_sentence_ids: tuple[str, ...] = ()
    triples: tuple[tuple[str, str, str], ...] = ()
    decomposition: tuple[tuple[str, str], ...] = ()


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for every non-blank line.

    Line numbers travel with the records so any later complaint about a
    record can point the user at the exact line to fix.
    """
    if not path.is_file():
        raise KgragError(f"{path} is a folder; this dataset expects a JSON Lines file")
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if raw.isspace():
                continue
            try:
                # decoded as ``json.loads`` decodes bytes, naming the encoding at once for
                # a line that opens an object ("{" then no NUL byte: UTF-8 to its
                # detection) rather than detecting it on every line
                encoding = ("utf-8" if raw[:1] == b"{" and raw[1:2] != b"\x00"
                            else json.detect_encoding(raw))
                record = json.loads(raw.decode(encoding, "surrogatepass"))
            except json.JSONDecodeError as exc:
                problem = f"not valid JSON ({exc.msg} at column {exc.colno})"
                raise KgragError(f"{path}:{lineno}: {problem}; fix this line") from None
            except UnicodeDecodeError:
                raise KgragError(f"{path}:{lineno}: not UTF-8 text; fix this line") from None
            except RecursionError:  # Python's JSON reader recurses once per level
                raise KgragError(f"{path}:{lineno}: nested too deeply to read (lists or "
                                 "objects inside each other past Python's recursion limit); "
                                 "fix this line") from None
            except ValueError:  # the one other refusal: an integer too long to convert
                raise KgragError(f"{path}:{lineno}: holds an integer of more than "
                                 f"{sys.get_int_max_str_digits()} digits, more than Python "
                                 "reads; fix this line") from None
            if not isinstance(record, dict):
                raise KgragError(f"{path}:{lineno}: expected a JSON object per line")
            # the pattern only where its first bytes occur: searched on every line, it
            # took a quarter of the import of a million lines
            if (b"\\u" in raw or b"\xed" in raw) and _MAY_HOLD_SURROGATE.search(raw):
                _refuse_surrogates(record, f"{path}:{lineno}")
            yield lineno, record


def _refuse_surrogates(record: dict[str, Any], where: str) -> None:
    """Refuse a line whose strings (keys too) hold a lone surrogate (``\\ud800``): half of
    a character, which no UTF-8 file, table or hash can take, so it would fail far from the
    line that holds it. Walked with a stack: a line may nest as deep as the reader allows."""
    stack: list[tuple[str, Any]] = [(f"field {key}", value) for key, value in record.items()]
    stack.extend(("a key", key) for key in record)  # popped first: a path names only keys
    while stack:
        at, value = stack.pop()
        if isinstance(value, str) and (found := _SURROGATE.search(value)):
            raise KgragError(f"{where}: {at} holds a lone surrogate escape "
                             f"(\\u{ord(found.group()):04x}), half of a character that "
                             "UTF-8 cannot encode; fix this line")
        if isinstance(value, dict):
            stack.extend((f"{at}.{key}", item) for key, item in value.items())
            stack.extend((f"a key in {at}", key) for key in value)
        elif isinstance(value, list):
            stack.extend((f"{at}[{index}]", item) for index, item in enumerate(value))


def get_field(record: Mapping[str, Any], name: str, kind: type[T], where: str) -> T:
    """Return ``record[name]``, insisting that it exists and has the JSON type expected.

    Checking here turns a ``KeyError`` deep in an importer into a message
    naming the file, line and field.
    """
    if name not in record:
        raise KgragError(f"{where}: missing field {name!r}")
    value = record[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = _JSON_KIND.get(kind, kind.__name__)
        raise KgragError(f"{where}: field {name!r} must be {expected}")
    return value


def get_question(record: Mapping[str, Any], where: str) -> str:
    """Return the ``question`` field, which must hold words: a blank question would be
    retrieved for and scored like any other, and lower every metric unnoticed."""
    question = get_field(record, "question", str, where)
    if not question.strip():
        raise KgragError(f"{where}: field 'question' is empty")
    return question


def get_items(record: Mapping[str, Any], name: str, where: str, what: str) -> list[Any]:
    """Return a field that must be a non-empty list: the ``what`` a question is asked over
    (its paragraphs), without which it could never be answered from the corpus."""
    items = get_field(record, name, list, where)
    if not items:
        raise KgragError(f"{where}: field {name!r} is empty; a question needs {what}")
    return items


def get_strings(record: Mapping[str, Any], name: str, where: str) -> list[str]:
    """Return a field that must be a list of strings (answer aliases, sentences)."""
    values = get_field(record, name, list, where)
    if not all(isinstance(value, str) for value in values):
        raise KgragError(f"{where}: field {name!r} must be a list of strings")
    return values


def clean_answers(answers: Iterable[str]) -> tuple[str, ...]:
    """Strip answers, drop empty ones and duplicates, keeping the gold answer first."""
    stripped = (answer.strip() for answer in answers)
    return tuple(dict.fromkeys(answer for answer in stripped if answer))


def question_record(lineno: int, record: Mapping[str, Any], where: str, id_field: str,
                    paragraphs: Iterable[tuple[str, str]], supporting: Iterable[tuple[str, str]],
                    *, aliases: Iterable[str] = (),
                    gold_sentence_ids: Iterable[str] = ()) -> QuestionRecord:
    """A benchmark question from the fields every benchmark line holds: its id (under
    ``id_field``), ``question`` and ``answer`` (``aliases`` follow the answer).

    The fields are read in that order, so a line with several flaws reports the
    same one first whatever its dataset. A question needs an answer that is not blank (or a
    non-blank alias): without one every answer metric would score it zero, unnoticed.
    """
    question_id = get_field(record, id_field, str, where)
    question = get_question(record, where)
    answers = clean_answers([get_field(record, "answer", str, where), *aliases])
    if not answers:
        raise KgragError(f"{where}: field 'answer' is empty and no alias names another; a "
                         "question needs a gold answer to be scored against")
    return QuestionRecord(
        line=lineno,
        question_id=question_id,
        question=question,
        answers=answers,
        paragraphs=tuple(paragraphs),
        supporting=tuple(supporting),
        gold_sentence_ids=tuple(gold_sentence_ids),
    )


def require_text(paragraphs: list[tuple[str, str]], name: str, where: str) -> None:
    """Refuse a question whose paragraphs (listed under ``name``) all have empty text:
    none of them could be retrieved, so it could never be answered from the corpus."""
    if not any(text.strip() for _, text in paragraphs):
        raise KgragError(f"{where}: every paragraph of {name!r} has empty text; a question "
                         "needs the paragraphs it is asked over")


def select_questions(
    records: list[QuestionRecord], cfg: Mapping[str, Any], path: Path
) -> list[QuestionRecord]:
    """Apply ``corpus.questions`` and then ``corpus.limit``, keeping file order.

    Unknown ids are reported all at once, since a typo in one id would
    otherwise silently shrink an evaluation.
    """
    if not records:
        raise KgragError(f"empty corpus: {path} holds no questions")
    first_line: dict[str, int] = {}
    for record in records:
        if record.question_id in first_line:
            raise KgragError(
                f"{path}:{record.line}: duplicate question id {record.question_id!r} "
                f"(first on line {first_line[record.question_id]})"
            )
        first_line[record.question_id] = record.line
    wanted = cfg.get("questions")
    if wanted is not None:
        unknown = [question_id for question_id in wanted if question_id not in first_line]
        if unknown:
            raise KgragError(
                f"corpus.questions lists ids that are not in {path}: {', '.join(unknown)}"
            )
        keep = set(wanted)
        records = [record for record in records if record.question_id in keep]
    limit = cfg.get("limit")
    if limit is not None:
        records = records[:limit]
    if not records:
        raise KgragError(f"corpus.limit / corpus.questions select no questions from {path}")
    return records


def question_corpus(records: list[QuestionRecord]) -> Corpus:
    """Build a corpus from selected questions: their paragraphs, deduplicated by (title, text),
    their gold triples (a triple shared by two questions is listed for each) and their
    gold decompositions."""
    documents: dict[tuple[str, str], str] = {}
    for record in records:
        for pair in record.paragraphs:
            if pair not in documents:
                documents[pair] = make_doc_id(*pair)
    triples = pl.DataFrame(
        [(record.question_id, *triple) for record in records for triple in record.triples],
        schema=TRIPLE_SCHEMA, orient="row")
    decompositions = pl.DataFrame(
        [(record.question_id, step, *pair) for record in records
         for step, pair in enumerate(record.decomposition, start=1)],
        schema=DECOMPOSITION_SCHEMA, orient="row")
    return Corpus(documents=documents_frame(documents), questions=questions_frame(records),
                  triples=triples, decompositions=decompositions)


def questions_frame(records: list[QuestionRecord]) -> pl.DataFrame:
    """Turn selected question records into the questions frame (supporting ids derived here)."""
    rows: dict[str, list[Any]] = {column: [] for column in QUESTION_SCHEMA}
    for record in records:
        supporting = dict.fromkeys(make_doc_id(*pair) for pair in record.supporting)
        rows["question_id"].append(record.question_id)
        rows["question"].append(record.question)
        rows["answers"].append(list(record.answers))
        rows["supporting_doc_ids"].append(list(supporting))
        rows["gold_sentence_ids"].append(list(record.gold_sentence_ids))
    return pl.DataFrame(rows, schema=QUESTION_SCHEMA)


def documents_frame(documents: dict[tuple[str, str], str]) -> pl.DataFrame:
    """Turn an insertion-ordered {(title, text): doc_id} map into the documents frame."""
    return pl.DataFrame(
        {
            "doc_id": list(documents.values()),
            "title": [title for title, _ in documents],
            "text": [text for _, text in documents],
        },
        schema=DOCUMENT_SCHEMA,
    )

