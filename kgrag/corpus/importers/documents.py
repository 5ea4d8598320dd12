"""Plain document collections: one document per JSON line (``jsonl``) or per text file
(``text``), with the user's own questions from ``corpus.questions_file``.

Such a corpus has no questions of its own; a questions file names each question's
supporting documents by the ids the user knows them by (a field of the line, or
the file's relative path). A corpus changes under its questions (a file is removed, a
``limit`` cuts it), so a question naming a document the corpus lacks is left out with
a warning (``corpus.missing_support: skip``, the default) rather than stopping the run;
``missing_support: error`` makes it the error it was. An id that names two documents
is always an error: which one supports the question is unknown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.corpus.corpus import SOURCE_SCHEMA, Corpus, empty_questions, make_doc_id
from kgrag.corpus.folder import corpus_files
from kgrag.corpus.importers.records import (
    QuestionRecord,
    clean_answers,
    documents_frame,
    get_field,
    get_question,
    get_strings,
    questions_frame,
    read_jsonl,
    select_questions,
)
from kgrag.errors import KgragError

log = logging.getLogger(__name__)
TEXT_SUFFIXES = frozenset({".txt", ".md"})
NAMED_IN_WARNINGS = 10  # skipped questions named in full; the rest are counted

_HIDDEN = re.compile(r"(^|/)\.")
OUTSIDE = "outside"  # the ``Corpus.sources`` status of a link leading out of the folder


def hidden(relative: str) -> bool:
    """Whether a path relative to a corpus folder is hidden (a dot file or folder)."""
    return bool(_HIDDEN.search(relative))


def plain_corpus(items: Iterable[tuple[str | None, str, str]], cfg: Mapping[str, Any],
                 dataset: str, id_hint: str) -> Corpus:
    """Build a corpus from (user's document id or None, title, text) items, with the
    questions of ``corpus.questions_file`` when the spec names one.

    Blank texts are skipped and duplicates dropped; ``limit`` counts the
    distinct documents kept, and stops reading once it is reached. ``id_hint``
    says where a document's id comes from, for messages about supporting ids.
    """
    questions_file = cfg.get("questions_file")
    if cfg.get("questions") is not None and questions_file is None:
        raise KgragError(
            f"dataset {dataset!r} has no questions of its own; remove corpus.questions "
            "or name your questions in corpus.questions_file"
        )
    limit = cfg.get("limit")
    documents: dict[tuple[str, str], str] = {}
    by_id: dict[str, dict[tuple[str, str], None]] = {}
    for key, title, text in items:
        if text and not text.isspace() and (title, text) not in documents:
            documents[(title, text)] = make_doc_id(title, text)
            if key is not None:
                by_id.setdefault(key, {})[(title, text)] = None
            if limit is not None and len(documents) >= limit:
                break
    skipped: tuple[str, ...]
    questions, skipped = empty_questions(), ()
    if questions_file is not None:
        hint = id_hint + (f"; corpus.limit keeps the first {limit} documents" if limit else "")
        records, missing = _own_questions(Path(questions_file), by_id, hint,
                                          cfg.get("missing_support", "skip") == "error")
        selected = select_questions(records, {"questions": cfg.get("questions")},
                                    Path(questions_file))
        skipped = tuple(r.question_id for r in selected if r.question_id in missing)
        if skipped:
            _report_skipped(Path(questions_file), skipped, missing, len(selected), hint)
        questions = questions_frame([r for r in selected if r.question_id not in missing])
    return Corpus(documents=documents_frame(documents), questions=questions,
                  questions_missing_support=skipped)


def _report_skipped(path: Path, skipped: tuple[str, ...], missing: Mapping[str, list[str]],
                  selected: int, id_hint: str) -> None:
    """One warning naming the questions left out and the documents they miss; an error
    when none is left, since there would be nothing to evaluate."""
    named = "; ".join(f"{q} ({', '.join(repr(d) for d in missing[q])})"
                      for q in skipped[:NAMED_IN_WARNINGS])
    more = f"; and {len(skipped) - NAMED_IN_WARNINGS} more" if len(
        skipped) > NAMED_IN_WARNINGS else ""
    if len(skipped) == selected:
        raise KgragError(f"{path}: every question names a supporting document the corpus "
                         f"lacks: {named}{more} ({id_hint})")
    log.warning("%s: skipped %d of %d questions naming a supporting document the corpus "
                "lacks (corpus.missing_support: skip): %s%s", path, len(skipped), selected,
                named, more)


def _own_questions(path: Path, by_id: Mapping[str, Mapping[tuple[str, str], None]],
                   id_hint: str, missing_is_error: bool
                   ) -> tuple[list[QuestionRecord], dict[str, list[str]]]:
    """The rows of a questions file: ``id``, ``question``, ``answers`` and, optionally,
    ``supporting`` document ids, each naming exactly one document of the corpus; and,
    by question id, the supporting ids no document has (an error if ``missing_is_error``)."""
    if not path.exists():
        raise KgragError(f"corpus.questions_file {path} does not exist; fix the path "
                         "(relative paths resolve against the spec's folder)")
    records: list[QuestionRecord] = []
    missing: dict[str, list[str]] = {}
    for lineno, record in read_jsonl(path):
        where = f"{path}:{lineno}"
        question_id = record.get("id")
        if not isinstance(question_id, (str, int)) or isinstance(question_id, bool):
            raise KgragError(f"{where}: field 'id' must be a string or an integer"
                             if "id" in record else f"{where}: missing field 'id'")
        answers = clean_answers(get_strings(record, "answers", where))
        if not answers:
            raise KgragError(f"{where}: field 'answers' needs at least one non-empty answer")
        supporting: list[tuple[str, str]] = []
        for doc_key in get_strings(record, "supporting", where) if "supporting" in record else []:
            named = by_id.get(doc_key, {})
            if len(named) > 1 or (not named and missing_is_error):
                problem = "no document has" if not named else f"{len(named)} documents have"
                raise KgragError(f"{where}: supporting: {problem} the id {doc_key!r} "
                                 f"({id_hint})")
            if not named:
                missing.setdefault(str(question_id), []).append(doc_key)
            supporting.extend(named)
        records.append(QuestionRecord(
            line=lineno, question_id=str(question_id),
            question=get_question(record, where), answers=answers,
            paragraphs=(), supporting=tuple(supporting)))
    return records, missing


def import_jsonl(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """One document per line; ``corpus.fields`` names the id, title and text fields.

    The title falls back to the id when the title field is missing or empty
    (many corpora carry only ``id`` and ``text``), so every document keeps a
    human-readable label.
    """
    fields = {"id": "id", "title": "title", "text": "text", **cfg.get("fields", {})}

    def items() -> Iterator[tuple[str | None, str, str]]:
        for lineno, record in read_jsonl(path):
            text = record.get(fields["text"])
            if not isinstance(text, str):  # raises the field's error, with its line
                text = get_field(record, fields["text"], str, f"{path}:{lineno}")
            doc_key = record.get(fields["id"])
            if doc_key is not None and (not isinstance(doc_key, (str, int))
                                        or isinstance(doc_key, bool)):
                raise KgragError(f"{path}:{lineno}: field {fields['id']!r} must be a string "
                                 "or an integer (or absent)")
            title = record.get(fields["title"])
            if not (isinstance(title, str) and title and not title.isspace()):
                if doc_key is None:
                    raise KgragError(
                        f"{path}:{lineno}: needs a string field {fields['title']!r} or an id "
                        f"field {fields['id']!r}; set corpus.fields to the names your file uses"
                    )
                title = str(doc_key)
            yield None if doc_key is None else str(doc_key), title, text

    hint = f"a document's id is its field {fields['id']!r}"
    return plain_corpus(items(), cfg, "jsonl", hint)


def import_text(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """A folder of ``.txt`` / ``.md`` files, recursively, in relative-path order.

    The title is the path relative to the folder (unique, and meaningful in
    citations). Hidden files and folders are skipped, and so are empty files; a link
    that leads out of the folder is skipped and is a row of ``Corpus.sources``
    (``kgrag.corpus.folder``).
    """
    if not path.is_dir():
        raise KgragError(f"dataset 'text' expects a folder of .txt / .md files, not {path}")
    listing = corpus_files(path, cfg.get("follow_links", False))

    def texts(files: list[Path]) -> list[str]:
        relative = (file.relative_to(path).as_posix() for file in files
                    if file.suffix.lower() in TEXT_SUFFIXES)
        return sorted(name for name in relative if not hidden(name))

    corpus = plain_corpus(
        ((name, name, _read_text(path / name)) for name in texts(listing.files)),
        cfg,
        "text",
        "a document's id is its file's path relative to the corpus folder, e.g. 'notes/a.md'",
    )
    skipped = [outside_link(name) for name in texts(listing.outside)]
    return replace(corpus, sources=pl.DataFrame(skipped, schema=SOURCE_SCHEMA))


def outside_link(name: str) -> dict[str, Any]:
    """The ``Corpus.sources`` row of a symbolic link that leads out of the corpus folder."""
    log.warning("skipped %s: a symbolic link to a file outside the corpus folder", name)
    return {"file": name, "sha256": None, "status": OUTSIDE,
            "detail": "a symbolic link to a file outside the corpus folder; set "
                      "corpus.follow_links: true to read it"}


def _read_text(file: Path) -> str:
    """Read a UTF-8 text file without its surrounding whitespace."""
    try:
        return file.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as exc:
        raise KgragError(f"{file} is not UTF-8 text ({exc.reason}); convert or remove it") from None
