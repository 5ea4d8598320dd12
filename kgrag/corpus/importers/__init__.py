"""Read benchmark files and plain document collections into a ``Corpus``.

Each dataset shape has one importer function, listed under its spec name in
``IMPORTERS``; ``load_corpus`` only resolves the paths and dispatches, so adding a
dataset means adding its module and one entry there. Importers receive an
existing path and the validated corpus section of the spec, and return the
finished ``Corpus`` (with the ``limit`` / ``questions`` selection applied).

The modules follow the shapes: ``records`` holds what importers share (strict
JSON Lines reading with file:line errors, question selection, answer cleaning,
document deduplication), ``multihop`` the multi-hop benchmarks (MuSiQue,
HotpotQA, 2Wiki, whose gold facts fill ``Corpus.triples``), ``holisqa`` HolisQA
(sentence-level gold in ``Corpus.sentences``), and ``kgqa`` question answering over a knowledge graph (the corpus is triples:
``Corpus.kg``), ``documents`` the plain
corpora (``jsonl``, ``text``), which have questions when the spec names a
``questions_file`` of the user's own, and ``files`` a folder of documents in several
formats (``documents``: PDF, HTML, Markdown, DOCX, text), converted through a cache
that ``load_corpus`` is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.configuration import resolve_path
from kgrag.corpus.converted import ConversionCache
from kgrag.corpus.corpus import Corpus
from kgrag.corpus.importers.documents import import_jsonl, import_text
from kgrag.corpus.importers.files import import_documents
from kgrag.corpus.importers.holisqa import import_holisqa
from kgrag.corpus.importers.kgqa import import_kgqa
from kgrag.corpus.importers.multihop import import_2wiki, import_hotpotqa, import_musique
from kgrag.errors import KgragError


@dataclass(frozen=True)
class Dataset:
    """A dataset shape: its importer, whether its files carry questions (a
    benchmark) or only documents, whose questions come from ``corpus.questions_file``,
    and whether it converts files, so that its importer also takes a ``ConversionCache``."""

    load: Callable[..., Corpus]
    questions: bool
    converts: bool = False


IMPORTERS: dict[str, Dataset] = {
    "musique": Dataset(import_musique, questions=True),
    "hotpotqa": Dataset(import_hotpotqa, questions=True),
    "2wiki": Dataset(import_2wiki, questions=True),
    "holisqa": Dataset(import_holisqa, questions=True),
    "kgqa": Dataset(import_kgqa, questions=True),
    "jsonl": Dataset(import_jsonl, questions=False),
    "text": Dataset(import_text, questions=False),
    "documents": Dataset(import_documents, questions=False, converts=True),
}


def load_corpus(cfg: Mapping[str, Any], base_dir: Path,
                converted: Path | None = None) -> Corpus:
    """Load the corpus described by the spec's ``corpus`` section.

    ``cfg`` is already schema-validated with defaults filled; relative paths
    resolve against ``base_dir`` (the spec's folder) so a spec works from any
    working directory. A ``documents`` folder keeps its files' conversions under
    ``converted`` (None: none kept). Every user-facing problem becomes a ``KgragError``.
    """
    dataset = cfg["dataset"]
    shape = IMPORTERS.get(dataset)
    if shape is None:
        known = ", ".join(sorted(IMPORTERS))
        raise KgragError(f"unknown corpus dataset {dataset!r}; use one of: {known}")
    path = resolve_path(cfg["path"], base_dir, base_dir)
    if not path.exists():
        raise KgragError(
            f"corpus path {path} does not exist; fix corpus.path "
            f"(relative paths resolve against {base_dir})"
        )
    if "questions_file" in cfg:  # importers read it, relative paths resolved like ``path``
        cfg = {**cfg, "questions_file": resolve_path(cfg["questions_file"], base_dir, base_dir)}
    if shape.converts and converted is not None:
        corpus = shape.load(path, cfg, ConversionCache(converted))
    else:
        corpus = shape.load(path, cfg)
    if corpus.documents.is_empty():
        raise KgragError(f"empty corpus: {path} holds no documents")
    return corpus
