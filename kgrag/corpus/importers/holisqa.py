"""HolisQA: a domain folder of articles split into sentences, and questions whose gold
evidence is a list of sentence ids.

The articles become the documents and ``Corpus.sentences`` records where each
sentence sits in its document's text, so context recall can be checked exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.corpus.corpus import SENTENCE_SCHEMA, Corpus, make_doc_id
from kgrag.corpus.folder import corpus_files
from kgrag.corpus.importers.records import (
    QuestionRecord,
    documents_frame,
    get_field,
    get_strings,
    question_record,
    questions_frame,
    read_jsonl,
    select_questions,
)
from kgrag.errors import KgragError


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

    Either file may be a symbolic link to a file inside the folder; one that leads out of
    it is refused unless ``corpus.follow_links`` (``kgrag.corpus.folder``): the corpus's
    sha256 and a bundle's copy of the folder leave such a link out, so reading it would
    build from a file that neither follows.
    """
    if not path.is_dir():
        raise KgragError(
            f"dataset 'holisqa' expects a HolisQA domain folder holding qa.jsonl and "
            f"sentences.jsonl, not {path}; point corpus.path at the folder"
        )
    qa_path, sentences_path = path / "qa.jsonl", path / "sentences.jsonl"
    outside = corpus_files(path, cfg.get("follow_links", False)).outside
    for file in (sentences_path, qa_path):
        if not file.is_file():
            raise KgragError(
                f"{file} is missing; a HolisQA domain folder holds qa.jsonl and "
                "sentences.jsonl, so point corpus.path at such a folder"
            )
        if file in outside:  # what the corpus hash and a bundle leave out is not read
            raise KgragError(
                f"{file} is a symbolic link to a file outside the HolisQA folder "
                f"({file.resolve()}), which is not read; copy the file into the folder, or "
                "set corpus.follow_links: true to read it"
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
        documents=documents_frame(documents),
        questions=questions_frame(selected),
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
    return question_record(lineno, record, where, "qa_id", supporting, supporting,
                           gold_sentence_ids=gold)

