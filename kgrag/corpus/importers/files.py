"""A folder of documents (``documents``): PDF, HTML, Markdown, DOCX and plain text files,
each converted to text (``kgrag.corpus.convert``) and remembered by content
(``kgrag.corpus.converted``).

A document is titled by the title its file names (``Converted.title``), else by its path
relative to the folder; that path is its id in a questions file, as in a ``text``
corpus. Its blocks are joined by blank lines, and each block's span becomes a row of
``Corpus.sections`` (file, page, heading), so every chunk can say where it came from.

A file that gives no text (encrypted, image-only, corrupt, unsupported, empty, not
UTF-8) is a row of ``Corpus.sources`` with its failure, and the rest of the folder is
imported as if it were not there.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.corpus.convert import CONVERTERS, Block, Converted, Unreadable, convert
from kgrag.corpus.converted import ConversionCache
from kgrag.corpus.corpus import SECTION_SCHEMA, SOURCE_SCHEMA, Corpus, make_doc_id
from kgrag.corpus.importers.documents import hidden, plain_corpus
from kgrag.errors import KgragError

log = logging.getLogger(__name__)
BLOCK_SEPARATOR = "\n\n"


def import_documents(path: Path, cfg: Mapping[str, Any], cache: ConversionCache | None = None
                     ) -> Corpus:
    """Every visible file under ``path``, recursively, in relative-path order."""
    if not path.is_dir():
        raise KgragError(f"dataset 'documents' expects a folder of "
                         f"{', '.join(sorted(CONVERTERS))} files, not {path}")
    files = sorted(f.relative_to(path).as_posix() for f in path.rglob("*") if f.is_file())
    sources: list[dict[str, Any]] = []
    converted: dict[str, Converted] = {}
    for name in files:
        if hidden(name):
            continue
        result, sha256, status = _convert(path / name, cache)
        if isinstance(result, Unreadable):
            log.warning("documents: skipped %s: %s", name, result)
            sources.append({"file": name, "sha256": sha256, "status": result.kind,
                            "detail": result.detail})
        else:
            sources.append({"file": name, "sha256": sha256, "status": status, "detail": None})
            converted[name] = result

    def items() -> Iterator[tuple[str, str, str]]:
        for name, document in converted.items():
            yield name, document.title or name, BLOCK_SEPARATOR.join(b.text for b in document.blocks)

    corpus = plain_corpus(items(), cfg, "documents",
                          "a document's id is its file's path relative to the corpus folder, "
                          "e.g. 'reports/q3.pdf'")
    kept = set(corpus.documents["doc_id"].to_list())
    sections: list[dict[str, Any]] = []
    for name, document in converted.items():
        doc_id = make_doc_id(document.title or name, BLOCK_SEPARATOR.join(
            b.text for b in document.blocks))
        if doc_id in kept:
            kept.discard(doc_id)  # a duplicate file's sections are its twin's
            sections.extend(_sections(doc_id, name, document.blocks))
    return Corpus(documents=corpus.documents, questions=corpus.questions,
                  sections=pl.DataFrame(sections, schema=SECTION_SCHEMA),
                  sources=pl.DataFrame(sources, schema=SOURCE_SCHEMA),
                  questions_missing_support=corpus.questions_missing_support)


def _convert(file: Path, cache: ConversionCache | None
             ) -> tuple[Converted | Unreadable, str | None, str]:
    """A file's conversion, its sha256 and whether it was ``converted`` or ``cached``."""
    suffix = file.suffix.lower()
    if suffix not in CONVERTERS:  # not read at all: a folder may hold large unrelated files
        return Unreadable("unsupported", f"no converter reads {suffix or 'files without a suffix'}"
                          ), None, "converted"
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise KgragError(f"cannot read {file}: {exc.strerror}") from None
    sha256 = hashlib.sha256(data).hexdigest()
    known = cache.get(sha256) if cache is not None else None
    if known is not None:
        return known, sha256, "cached"
    try:
        result: Converted | Unreadable = convert(data, suffix)
    except Unreadable as failure:
        result = failure
    if cache is not None:
        cache.put(sha256, result)
    return result, sha256, "converted"


def _sections(doc_id: str, name: str, blocks: tuple[Block, ...]) -> Iterator[dict[str, Any]]:
    """The span of each block in the joined text, with its file, page and heading."""
    start = 0
    for block in blocks:
        end = start + len(block.text)
        yield {"doc_id": doc_id, "start": start, "end": end, "file": name, "page": block.page,
               "heading": block.heading}
        start = end + len(BLOCK_SEPARATOR)
