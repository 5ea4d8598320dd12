"""Which dataset shape a path holds, so that ``kgrag init`` can write its spec.

A folder is a HolisQA domain when it holds HolisQA's two files, else a folder of
documents. A JSON Lines file is told by the keys of its first line, each shape by the
keys only it has: MuSiQue's ``paragraphs``, KGQA's ``gold_triples``, 2Wiki's
``evidences`` (HotpotQA has the same ``context`` and ``supporting_facts`` without them),
else one document per line. A plain corpus has questions when a ``questions.jsonl``
sits inside the folder or beside the folder or file; its first line must look like one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgrag.errors import KgragError

QUESTIONS_FILE = "questions.jsonl"
HOLISQA_FILES = ("sentences.jsonl", "qa.jsonl")
TEXT_FIELDS = ("text", "contents", "content", "body", "paragraph_text")
ID_FIELDS = ("id", "_id", "doc_id", "docid")
# (a key only this shape's lines have, the dataset); checked in this order
BENCHMARK_KEYS = (("paragraphs", "musique"), ("gold_triples", "kgqa"),
                  ("evidences", "2wiki"), ("supporting_facts", "hotpotqa"))


@dataclass(frozen=True)
class Detected:
    """A corpus path's dataset shape: the ``dataset`` a spec names, the questions file of
    a plain corpus (None: none found, or a benchmark, whose questions are its own), how
    many questions there are (lines; None when there are none) and, for ``jsonl``, the
    fields that differ from the defaults (``id``, ``title``, ``text``)."""

    dataset: str
    path: Path
    questions_file: Path | None = None
    questions: int | None = None
    fields: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def detect(path: Path) -> Detected:
    """The shape of the corpus at ``path`` (a folder or a JSON Lines file)."""
    path = path.expanduser().resolve()
    if path.is_dir():
        if all((path / name).is_file() for name in HOLISQA_FILES):
            return Detected("holisqa", path, questions=_lines(path / "qa.jsonl"))
        return _with_questions(Detected("documents", path), (path, path.parent))
    if not path.is_file():
        raise KgragError(f"{path} does not exist; kgrag init takes a folder of documents, a "
                         "JSON Lines file or a HolisQA domain folder")
    first = _first_object(path)
    for key, dataset in BENCHMARK_KEYS:
        if key in first:
            return Detected(dataset, path, questions=_lines(path))
    return _with_questions(Detected("jsonl", path, fields=_plain_fields(path, first)),
                           (path.parent,))


def _with_questions(found: Detected, folders: tuple[Path, ...]) -> Detected:
    """``found`` with the first ``questions.jsonl`` of ``folders`` whose first line is a
    question (``question`` and ``answers``); one that is not is left out, with a note."""
    notes = []
    for folder in folders:
        candidate = folder / QUESTIONS_FILE
        if not candidate.is_file() or candidate == found.path:
            continue
        try:
            first = _first_object(candidate)
        except KgragError as exc:
            notes.append(f"{candidate} left out: {exc}")
            continue
        if {"question", "answers"} <= first.keys():
            return Detected(found.dataset, found.path, candidate, _lines(candidate),
                            found.fields, tuple(notes))
        notes.append(f"{candidate} left out: its first line has no 'question' and 'answers'")
    return Detected(found.dataset, found.path, None, None, found.fields, tuple(notes))


def _first_object(path: Path) -> dict[str, Any]:
    """The first non-blank line of ``path`` as a JSON object."""
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if raw.strip():
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                    raise KgragError(f"{path}:{lineno}: not a JSON object; kgrag init takes a "
                                     "folder of documents or a JSON Lines file") from None
                if not isinstance(record, dict):
                    raise KgragError(f"{path}:{lineno}: expected a JSON object per line")
                return record
    raise KgragError(f"{path} is empty")


def _plain_fields(path: Path, first: dict[str, Any]) -> dict[str, str]:
    """The ``corpus.fields`` of a one-document-per-line file that differ from the
    defaults: its text is the first of ``TEXT_FIELDS`` it has, else its longest string
    that is no id or title; its id the first of ``ID_FIELDS``; a document needs a title
    or an id."""
    strings = {key: value for key, value in first.items()
               if isinstance(value, str) and key not in (*ID_FIELDS, "title")}
    text = next((key for key in TEXT_FIELDS if key in strings),
                max(strings, key=lambda key: len(strings[key]), default=None))
    if text is None:
        raise KgragError(f"{path}:1: no string field to read as a document's text (keys: "
                         f"{', '.join(sorted(first)) or 'none'}); kgrag init knows MuSiQue, "
                         "HotpotQA, 2Wiki, KGQA and one document per line")
    ids = [key for key in ID_FIELDS if isinstance(first.get(key), (str, int))]
    if not ids and not isinstance(first.get("title"), str):
        raise KgragError(f"{path}:1: a document needs an id or a title field (one of "
                         f"{', '.join(ID_FIELDS)}, or title); none is on the first line")
    chosen = {"text": text, **({"id": ids[0]} if ids else {})}
    return {key: value for key, value in chosen.items() if value != key}


def _lines(path: Path) -> int:
    """Non-blank lines of ``path``: its questions, one per line."""
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())
