"""A folder of documents (``documents``): PDF, HTML, Markdown, DOCX and plain text files,
each converted to text (``kgrag.corpus.convert``) and remembered by content
(``kgrag.corpus.converted``).

A document is titled by the title its file names (``Converted.title``), else by its path
relative to the folder; that path is its id in a questions file, as in a ``text``
corpus. Its blocks are joined by blank lines, and each block's span becomes a row of
``Corpus.sections`` (file, page, heading), so every chunk can say where it came from.

A file that gives no text (encrypted, image-only, corrupt, unsupported, empty, not
UTF-8, larger than ``corpus.max_file_mb``, too complex to parse, gone before it was read),
or a symbolic link that leads out of the folder (``kgrag.corpus.folder``), is a row of
``Corpus.sources`` with its failure, and the rest of the folder is imported as if it were
not there.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from kgrag.corpus.convert import CONVERTERS, Block, Converted, Unreadable, convert
from kgrag.corpus.converted import ConversionCache
from kgrag.corpus.corpus import SECTION_SCHEMA, SOURCE_SCHEMA, Corpus, make_doc_id
from kgrag.corpus.folder import corpus_files
from kgrag.corpus.importers.documents import hidden, outside_link, plain_corpus
from kgrag.errors import KgragError

log = logging.getLogger(__name__)
BLOCK_SEPARATOR = "\n\n"
MAX_FILE_MB = 20  # corpus.max_file_mb when absent: room for real documents, not for bombs


def import_documents(path: Path, cfg: Mapping[str, Any], cache: ConversionCache | None = None
                     ) -> Corpus:
    """Every visible file under ``path``, recursively, in relative-path order."""
    if not path.is_dir():
        raise KgragError(f"dataset 'documents' expects a folder of "
                         f"{', '.join(sorted(CONVERTERS))} files, not {path}")
    listing = corpus_files(path, cfg.get("follow_links", False))
    max_bytes = int(cfg.get("max_file_mb", MAX_FILE_MB) * 2**20)
    sources = [outside_link(name) for name in _visible(path, listing.outside)]
    converted: dict[str, Converted] = {}
    for name in _visible(path, listing.files):
        result, sha256, status = _convert(path / name, cache, max_bytes)
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
    sections: list[tuple] = []  # rows of SECTION_SCHEMA: a tuple is a third of a dict's size
    for name, document in converted.items():
        doc_id = make_doc_id(document.title or name, BLOCK_SEPARATOR.join(
            b.text for b in document.blocks))
        if doc_id in kept:
            kept.discard(doc_id)  # a duplicate file's sections are its twin's
            sections.extend(_sections(doc_id, name, document.blocks))
    return Corpus(documents=corpus.documents, questions=corpus.questions,
                  sections=pl.DataFrame(sections, schema=SECTION_SCHEMA, orient="row"),
                  sources=pl.DataFrame(sorted(sources, key=lambda row: row["file"]),
                                       schema=SOURCE_SCHEMA),
                  questions_missing_support=corpus.questions_missing_support)


def _visible(folder: Path, files: list[Path]) -> list[str]:
    """The paths relative to ``folder`` of those ``files`` that are not hidden, sorted."""
    return sorted(name for f in files if not hidden(name := f.relative_to(folder).as_posix()))


def _convert(file: Path, cache: ConversionCache | None, max_bytes: int
             ) -> tuple[Converted | Unreadable, str | None, str]:
    """A file's conversion, its sha256 and whether it was ``converted`` or ``cached``."""
    suffix = file.suffix.lower()
    if suffix not in CONVERTERS:  # not read at all: a folder may hold large unrelated files
        return Unreadable("unsupported", f"no converter reads {suffix or 'files without a suffix'}"
                          ), None, "converted"
    data = _read(file, max_bytes)
    if isinstance(data, Unreadable):
        return data, None, "converted"
    sha256 = hashlib.sha256(data).hexdigest()
    known = cache.get(sha256, suffix) if cache is not None else None
    if known is not None:
        return known, sha256, "cached"
    try:
        result: Converted | Unreadable = convert(data, suffix)
    except Unreadable as failure:
        result = failure
    if cache is not None:
        cache.put(sha256, suffix, result)
    return result, sha256, "converted"


def _read(file: Path, max_bytes: int) -> bytes | Unreadable:
    """A file's bytes, or why they were not read: larger than ``corpus.max_file_mb``
    (checked before reading, and again by reading one byte more, for a file that grows),
    or gone since the folder was listed (renamed, moved or deleted meanwhile)."""
    try:
        with file.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(max_bytes + 1) if size <= max_bytes else b""
    except FileNotFoundError:
        return Unreadable("vanished", "the file was renamed, moved or deleted during the import")
    except OSError as exc:
        raise KgragError(f"cannot read {file}: {exc.strerror}") from None
    if size > max_bytes or len(data) > max_bytes:
        return Unreadable("too_large", f"{max(size, len(data)) / 2**20:,.1f} MB, more than "
                          f"corpus.max_file_mb ({max_bytes / 2**20:g} MB)")
    return data


def _sections(doc_id: str, name: str, blocks: tuple[Block, ...]) -> Iterator[tuple]:
    """The span of each block in the joined text, with its file, page and heading."""
    start = 0
    for block in blocks:
        end = start + len(block.text)
        yield doc_id, start, end, name, block.page, block.heading
        start = end + len(BLOCK_SEPARATOR)
