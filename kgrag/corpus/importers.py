"""Read benchmark files and plain document collections into a ``Corpus``.

Each dataset shape has one importer function registered under its spec name
with ``@importer(name)``. ``load_corpus`` only resolves the path and dispatches
through the registry, so adding a dataset means adding one decorated function
here and nothing else. Importers receive an existing path and the validated
corpus section of the spec, and return the finished ``Corpus`` (with the
``limit`` / ``questions`` selection applied); the helpers below do the shared
work: strict JSON Lines reading with file:line errors, question selection,
answer cleaning and document deduplication.

Datasets with sentence-level gold evidence (HolisQA) also fill
``Corpus.sentences`` with each sentence's character span in its document;
2Wiki's gold facts (``evidences``) fill ``Corpus.triples``. Plain corpora (``jsonl``,
``text``) have questions when the spec names a ``questions_file`` of the user's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from kgrag.corpus.corpus import (
    DOCUMENT_SCHEMA,
    QUESTION_SCHEMA,
    SENTENCE_SCHEMA,
    TRIPLE_SCHEMA,
    Corpus,
    empty_questions,
    make_doc_id,
)
from kgrag.errors import KgragError

Importer = Callable[[Path, Mapping[str, Any]], Corpus]

IMPORTERS: dict[str, Importer] = {}

TEXT_SUFFIXES = frozenset({".txt", ".md"})

_HIDDEN = re.compile(r"(^|/)\.")

_JSON_KIND = {
    str: "a string",
    list: "a list",
    dict: "an object",
    bool: "true or false",
    int: "an integer",
}

T = TypeVar("T")


def importer(name: str) -> Callable[[Importer], Importer]:
    """Register an importer under the dataset name the spec uses.

    A decorator keeps each importer's name next to its code and lets new
    datasets plug in without editing ``load_corpus``.
    """

    def register(func: Importer) -> Importer:
        IMPORTERS[name] = func
        return func

    return register


def load_corpus(cfg: Mapping[str, Any], base_dir: Path) -> Corpus:
    """Load the corpus described by the spec's ``corpus`` section.

    ``cfg`` is already schema-validated with defaults filled; relative paths
    resolve against ``base_dir`` (the spec's folder) so a spec works from any
    working directory. Every user-facing problem becomes a ``KgragError``.
    """
    dataset = cfg["dataset"]
    load = IMPORTERS.get(dataset)
    if load is None:
        known = ", ".join(sorted(IMPORTERS))
        raise KgragError(f"unknown corpus dataset {dataset!r}; use one of: {known}")
    path = _resolve(cfg["path"], base_dir)
    if not path.exists():
        raise KgragError(
            f"corpus path {path} does not exist; fix corpus.path "
            f"(relative paths resolve against {base_dir})"
        )
    if "questions_file" in cfg:  # importers read it, relative paths resolved like ``path``
        cfg = {**cfg, "questions_file": _resolve(cfg["questions_file"], base_dir)}
    corpus = load(path, cfg)
    if corpus.documents.is_empty():
        raise KgragError(f"empty corpus: {path} holds no documents")
    return corpus


def _resolve(value: str, base_dir: Path) -> Path:
    """A path the spec names: ``~`` expanded, relative to ``base_dir`` unless absolute."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


# --- helpers shared by importers -------------------------------------------------------------


@dataclass(frozen=True)
class QuestionRecord:
    """One benchmark question with the paragraphs it contributes to the corpus.

    ``paragraphs`` and ``supporting`` are (title, text) pairs; ids are derived
    only when the corpus is assembled, after selection, so documents of
    questions that were not selected never enter the corpus.
    ``gold_sentence_ids`` is filled only by datasets with sentence-level gold,
    ``triples`` (subject, relation, object) only by datasets with gold facts.
    """

    line: int
    question_id: str
    question: str
    answers: tuple[str, ...]
    paragraphs: tuple[tuple[str, str], ...]
    supporting: tuple[tuple[str, str], ...]
    gold_sentence_ids: tuple[str, ...] = ()
    triples: tuple[tuple[str, str, str], ...] = ()


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for every non-blank line.

    Line numbers travel with the records so any later complaint about a
    record can point the user at the exact line to fix.
    """
    if not path.is_file():
        raise KgragError(f"{path} is a folder; this dataset expects a JSON Lines file")
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as exc:
                problem = f"not valid JSON ({exc.msg} at column {exc.colno})"
                raise KgragError(f"{path}:{lineno}: {problem}; fix this line") from None
            except UnicodeDecodeError:
                raise KgragError(f"{path}:{lineno}: not UTF-8 text; fix this line") from None
            if not isinstance(record, dict):
                raise KgragError(f"{path}:{lineno}: expected a JSON object per line")
            yield lineno, record


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
    and their gold triples (a triple shared by two questions is listed for each)."""
    documents: dict[tuple[str, str], str] = {}
    for record in records:
        for pair in record.paragraphs:
            if pair not in documents:
                documents[pair] = make_doc_id(*pair)
    triples = pl.DataFrame(
        [(record.question_id, *triple) for record in records for triple in record.triples],
        schema=TRIPLE_SCHEMA, orient="row")
    return Corpus(documents=_documents_frame(documents), questions=_questions_frame(records),
                  triples=triples)


def _questions_frame(records: list[QuestionRecord]) -> pl.DataFrame:
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
        if text.strip() and (title, text) not in documents:
            documents[(title, text)] = make_doc_id(title, text)
            if key is not None:
                by_id.setdefault(key, {})[(title, text)] = None
            if limit is not None and len(documents) >= limit:
                break
    questions = empty_questions()
    if questions_file is not None:
        hint = id_hint + (f"; corpus.limit keeps the first {limit} documents" if limit else "")
        records = _own_questions(Path(questions_file), by_id, hint)
        questions = _questions_frame(
            select_questions(records, {"questions": cfg.get("questions")}, Path(questions_file)))
    return Corpus(documents=_documents_frame(documents), questions=questions)


def _own_questions(path: Path, by_id: Mapping[str, Mapping[tuple[str, str], None]],
                   id_hint: str) -> list[QuestionRecord]:
    """The rows of a questions file: ``id``, ``question``, ``answers`` and, optionally,
    ``supporting`` document ids, each naming exactly one document of the corpus."""
    if not path.exists():
        raise KgragError(f"corpus.questions_file {path} does not exist; fix the path "
                         "(relative paths resolve against the spec's folder)")
    records = []
    for lineno, record in read_jsonl(path):
        where = f"{path}:{lineno}"
        question_id = record.get("id")
        if not isinstance(question_id, (str, int)) or isinstance(question_id, bool):
            raise KgragError(f"{where}: field 'id' must be a string or an integer"
                             if "id" in record else f"{where}: missing field 'id'")
        answers = clean_answers(get_strings(record, "answers", where))
        if not answers:
            raise KgragError(f"{where}: field 'answers' needs at least one non-empty answer")
        supporting = []
        for doc_key in get_strings(record, "supporting", where) if "supporting" in record else []:
            named = by_id.get(doc_key, {})
            if len(named) != 1:
                problem = "no document has" if not named else f"{len(named)} documents have"
                raise KgragError(f"{where}: supporting: {problem} the id {doc_key!r} "
                                 f"({id_hint})")
            supporting.extend(named)
        records.append(QuestionRecord(
            line=lineno, question_id=str(question_id),
            question=get_field(record, "question", str, where), answers=answers,
            paragraphs=(), supporting=tuple(supporting)))
    return records


def _documents_frame(documents: dict[tuple[str, str], str]) -> pl.DataFrame:
    """Turn an insertion-ordered {(title, text): doc_id} map into the documents frame."""
    return pl.DataFrame(
        {
            "doc_id": list(documents.values()),
            "title": [title for title, _ in documents],
            "text": [text for _, text in documents],
        },
        schema=DOCUMENT_SCHEMA,
    )


# --- importers -------------------------------------------------------------------------------


@importer("musique")
def import_musique(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """MuSiQue: each line brings its 20 paragraphs; ``is_supporting`` marks the gold ones."""
    records = []
    for lineno, record in read_jsonl(path):
        where = f"{path}:{lineno}"
        paragraphs = []
        supporting = []
        for paragraph in get_field(record, "paragraphs", list, where):
            if not isinstance(paragraph, dict):
                raise KgragError(f"{where}: each entry of 'paragraphs' must be an object")
            pair = (
                get_field(paragraph, "title", str, where),
                get_field(paragraph, "paragraph_text", str, where),
            )
            paragraphs.append(pair)
            if get_field(paragraph, "is_supporting", bool, where):
                supporting.append(pair)
        aliases = get_strings(record, "answer_aliases", where) if "answer_aliases" in record else []
        records.append(
            QuestionRecord(
                line=lineno,
                question_id=get_field(record, "id", str, where),
                question=get_field(record, "question", str, where),
                answers=clean_answers([get_field(record, "answer", str, where), *aliases]),
                paragraphs=tuple(paragraphs),
                supporting=tuple(supporting),
            )
        )
    return question_corpus(select_questions(records, cfg, path))


@importer("hotpotqa")
def import_hotpotqa(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """HotpotQA (distractor setting): ``context`` paragraphs, gold titles in ``supporting_facts``."""
    records = [_context_question(lineno, record, path) for lineno, record in read_jsonl(path)]
    return question_corpus(select_questions(records, cfg, path))


@importer("2wiki")
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
    for entry in get_field(record, "context", list, where):
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], list)
            and all(isinstance(sentence, str) for sentence in entry[1])
        ):
            raise KgragError(f"{where}: 'context' entries must be [title, [sentences]]")
        paragraphs.append((entry[0], _join_sentences(entry[1])))
    return QuestionRecord(
        line=lineno,
        question_id=get_field(record, "_id", str, where),
        question=get_field(record, "question", str, where),
        answers=clean_answers([get_field(record, "answer", str, where)]),
        paragraphs=tuple(paragraphs),
        supporting=tuple(pair for pair in paragraphs if pair[0] in gold_titles),
        triples=_evidences(record, where),
    )


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


@dataclass(frozen=True)
class _Article:
    """One HolisQA article as a document, with its sentences' spans in ``text``.

    ``sentences`` holds (sentence_id, start, end, text) with ``text ==
    self.text[start:end]``.
    """

    title: str
    text: str
    doc_id: str
    sentences: tuple[tuple[str, int, int, str], ...]


@importer("holisqa")
def import_holisqa(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """HolisQA: a domain folder holding ``sentences.jsonl`` (the articles) and ``qa.jsonl``.

    Each article is one document, titled by its article id, its sentences
    joined in ``sent_idx`` order with single spaces (whitespace collapsed as
    in HotpotQA); ``Corpus.sentences`` records where each sentence sits in that
    text, so context recall can check gold sentences against retrieved chunk
    spans exactly, without an LLM. A question's answer is the long answer, its
    supporting documents the articles of its ``context_sentence_ids``. Blank
    sentences add no text and are dropped from the gold ids too (nothing could
    retrieve them).

    A ``limit`` / ``questions`` selection keeps the contiguous run of articles
    from the first to the last one the selected questions' gold sentences
    cite (in ``sentences.jsonl`` order), not only the cited ones: HolisQA
    writes its questions over contiguous slices of articles, so the
    neighbours are the natural distractors, and a gold-only corpus would make
    retrieval trivial. Without a selection every article is kept (also when
    the selected questions cite no sentence at all).
    """
    if not path.is_dir():
        raise KgragError(
            f"dataset 'holisqa' expects a HolisQA domain folder holding qa.jsonl and "
            f"sentences.jsonl, not {path}; point corpus.path at the folder"
        )
    qa_path, sentences_path = path / "qa.jsonl", path / "sentences.jsonl"
    for file in (sentences_path, qa_path):
        if not file.is_file():
            raise KgragError(
                f"{file} is missing; a HolisQA domain folder holds qa.jsonl and "
                "sentences.jsonl, so point corpus.path at such a folder"
            )
    articles, position, blank = _holisqa_articles(sentences_path)
    records = [
        _holisqa_question(lineno, record, qa_path, articles, position, blank)
        for lineno, record in read_jsonl(qa_path)
    ]
    selected = select_questions(records, cfg, qa_path)
    cited = [position[sid] for record in selected for sid in record.gold_sentence_ids]
    if cited and (cfg.get("limit") is not None or cfg.get("questions") is not None):
        articles = articles[min(cited) : max(cited) + 1]
    sentences: dict[str, list[Any]] = {column: [] for column in SENTENCE_SCHEMA}
    for article in articles:
        for sentence_id, start, end, text in article.sentences:
            sentences["sentence_id"].append(sentence_id)
            sentences["doc_id"].append(article.doc_id)
            sentences["start"].append(start)
            sentences["end"].append(end)
            sentences["text"].append(text)
    documents = {(article.title, article.text): article.doc_id for article in articles}
    return Corpus(
        documents=_documents_frame(documents),
        questions=_questions_frame(selected),
        sentences=pl.DataFrame(sentences, schema=SENTENCE_SCHEMA),
    )


def _holisqa_articles(path: Path) -> tuple[list[_Article], dict[str, int], set[str]]:
    """Read ``sentences.jsonl`` into articles (file order), sentence id → article index,
    and the ids of blank sentences.

    Blank sentences and articles made only of them are left out of the first two; their
    ids are kept apart so a question citing one is not mistaken for a broken reference.
    """
    by_article: dict[str, list[tuple[int, int, str, str]]] = {}
    line_of: dict[str, int] = {}
    for lineno, record in read_jsonl(path):
        where = f"{path}:{lineno}"
        sentence_id = get_field(record, "sentence_id", str, where)
        if sentence_id in line_of:
            raise KgragError(
                f"{where}: duplicate sentence id {sentence_id!r} (first on line "
                f"{line_of[sentence_id]}); give every sentence its own id"
            )
        line_of[sentence_id] = lineno
        article_id = get_field(record, "article_id", str, where)
        index = get_field(record, "sent_idx", int, where)
        text = get_field(record, "text", str, where)
        by_article.setdefault(article_id, []).append((index, lineno, sentence_id, text))
    articles: list[_Article] = []
    position: dict[str, int] = {}
    blank: set[str] = set()
    for article_id, rows in by_article.items():
        rows.sort()
        spans: list[tuple[str, int, int, str]] = []
        offset = 0
        for (index, lineno, sentence_id, text), previous in zip(rows, [None, *rows]):
            if previous is not None and previous[0] == index:
                raise KgragError(
                    f"{path}:{lineno}: article {article_id!r} has sent_idx {index} twice "
                    f"(first on line {previous[1]}); fix the sentence order"
                )
            clean = " ".join(text.split())
            if not clean:
                blank.add(sentence_id)
                continue
            start = offset + 1 if spans else 0
            spans.append((sentence_id, start, start + len(clean), clean))
            offset = start + len(clean)
        if not spans:
            continue
        text = " ".join(sentence for *_, sentence in spans)
        for sentence_id, *_ in spans:
            position[sentence_id] = len(articles)
        articles.append(_Article(article_id, text, make_doc_id(article_id, text), tuple(spans)))
    return articles, position, blank


def _holisqa_question(
    lineno: int,
    record: Mapping[str, Any],
    path: Path,
    articles: list[_Article],
    position: Mapping[str, int],
    blank: set[str],
) -> QuestionRecord:
    """Parse one ``qa.jsonl`` line; every context sentence id must name a known sentence."""
    where = f"{path}:{lineno}"
    gold: dict[str, None] = {}
    for sentence_id in get_strings(record, "context_sentence_ids", where):
        if sentence_id not in position:
            if sentence_id not in blank:
                raise KgragError(
                    f"{where}: context sentence id {sentence_id!r} is not in "
                    f"{path.with_name('sentences.jsonl')}; fix the id or use the "
                    "sentences.jsonl of the same domain"
                )
            continue
        gold[sentence_id] = None
    supporting = dict.fromkeys(
        (articles[position[sid]].title, articles[position[sid]].text) for sid in gold
    )
    return QuestionRecord(
        line=lineno,
        question_id=get_field(record, "qa_id", str, where),
        question=get_field(record, "question", str, where),
        answers=clean_answers([get_field(record, "answer", str, where)]),
        paragraphs=tuple(supporting),
        supporting=tuple(supporting),
        gold_sentence_ids=tuple(gold),
    )


@importer("jsonl")
def import_jsonl(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """One document per line; ``corpus.fields`` names the id, title and text fields.

    The title falls back to the id when the title field is missing or empty
    (many corpora carry only ``id`` and ``text``), so every document keeps a
    human-readable label.
    """
    fields = {"id": "id", "title": "title", "text": "text", **cfg.get("fields", {})}

    def items() -> Iterator[tuple[str | None, str, str]]:
        for lineno, record in read_jsonl(path):
            where = f"{path}:{lineno}"
            text = get_field(record, fields["text"], str, where)
            doc_key = record.get(fields["id"])
            if not isinstance(doc_key, (str, int)) or isinstance(doc_key, bool):
                doc_key = None
            title = record.get(fields["title"])
            if not (isinstance(title, str) and title.strip()):
                if doc_key is None:
                    raise KgragError(
                        f"{where}: needs a string field {fields['title']!r} or an id field "
                        f"{fields['id']!r}; set corpus.fields to the names your file uses"
                    )
                title = str(doc_key)
            yield None if doc_key is None else str(doc_key), title, text

    hint = f"a document's id is its field {fields['id']!r}"
    return plain_corpus(items(), cfg, "jsonl", hint)


@importer("text")
def import_text(path: Path, cfg: Mapping[str, Any]) -> Corpus:
    """A folder of ``.txt`` / ``.md`` files, recursively, in relative-path order.

    The title is the path relative to the folder (unique, and meaningful in
    citations). Hidden files and folders are skipped, and so are empty files.
    """
    if not path.is_dir():
        raise KgragError(f"dataset 'text' expects a folder of .txt / .md files, not {path}")
    files = sorted(
        (
            file.relative_to(path)
            for file in path.rglob("*")
            if file.suffix.lower() in TEXT_SUFFIXES and file.is_file()
        ),
        key=lambda relative: relative.as_posix(),
    )
    visible = (relative for relative in files if not _HIDDEN.search(relative.as_posix()))
    return plain_corpus(
        ((relative.as_posix(), relative.as_posix(), _read_text(path / relative))
         for relative in visible),
        cfg,
        "text",
        "a document's id is its file's path relative to the corpus folder, e.g. 'notes/a.md'",
    )


def _read_text(file: Path) -> str:
    """Read a UTF-8 text file without its surrounding whitespace."""
    try:
        return file.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as exc:
        raise KgragError(f"{file} is not UTF-8 text ({exc.reason}); convert or remove it") from None
