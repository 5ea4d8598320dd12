"""Documents read as written: setext Markdown headings, a chunk's heading where most of
it lies, a PDF's words whole across line-end hyphens and ligatures, phrase nodes that
are phrases; shown on small files and on the project's own docs as a folder
(``tests/corpus/own_docs.py``)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from fpdf import FPDF

from kgrag.corpus import load_corpus
from kgrag.corpus.chunking import chunk_documents
from kgrag.corpus.convert import convert
from kgrag.corpus.sources import with_sources
from kgrag.corpus.tokenizer import Tokenizer
from kgrag.graphs.extraction.nlp import extract_parse
from kgrag.models.pipelines import load_pipeline, resolve_pipeline
from tests.corpus import own_docs

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def lines_pdf(*pages: list[str], font: Path | None = None) -> bytes:
    """A PDF of these pages of lines, one text line each, as a typesetter broke them."""
    pdf = FPDF()
    if font is None:
        pdf.set_font("Helvetica", size=11)
    else:
        pdf.add_font("body", fname=str(font))
        pdf.set_font("body", size=11)
    for lines in pages:
        pdf.add_page()
        for line in lines:
            pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_setext_headings_are_headings_and_code_is_not():
    text = ("Rivers of France\n================\n\nA short guide.\n\n"
            "The Rhone\n---------\n\nIt flows south.\n\n```sh\n# not a heading\n```\n\n"
            "## The `Loire` river\n\nIt is long.")
    converted = convert(text.encode(), ".md")
    assert "\n\n".join(b.text for b in converted.blocks) == text
    assert [b.heading for b in converted.blocks] == ["Rivers of France", "The Rhone",
                                                     "The Loire river"]
    assert converted.blocks[1].text.endswith("# not a heading\n```")
    assert converted.title == "Rivers of France"


def test_a_chunk_takes_the_heading_most_of_it_lies_under(tmp_path, tokenizer: Tokenizer):
    body = " ".join(f"Rule {i} says a stream is not shared between threads." for i in range(30))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "zlib.html").write_text(
        "<p>Previous: 2.6 Memory. Next: 2.8 Errors.</p>"
        f"<h2>2.7 Thread Safety</h2><p>{body}</p><h2>2.8 Errors</h2><p>{body}</p>")
    cfg = {"dataset": "documents", "path": str(tmp_path / "docs"), "limit": None,
           "questions": None, "fields": {}}
    corpus = load_corpus(cfg, tmp_path)
    chunks = with_sources(chunk_documents(corpus.documents, tokenizer, 96, 8), corpus.sections)
    assert chunks["text"][0].startswith("Previous: 2.6 Memory.")
    assert chunks["heading"][0] == "2.7 Thread Safety"
    for text, heading in zip(chunks["text"], chunks["heading"]):
        if "2.8 Errors\n\n" in text:  # the chunk across the two sections
            before, after = text.split("2.8 Errors\n\n")
            assert heading == ("2.7 Thread Safety" if len(before) > len(after) else
                               "2.8 Errors")


def test_a_pdf_reads_words_whole_across_line_end_hyphens():
    converted = convert(lines_pdf([
        "The converter reads every docu-",
        "ment of a folder. Each document has pages; KET-",
        "RAG builds a skeleton, as KET-RAG's paper says. A well-",
        "known trick: an infor-",
        "mation retrieval system cites its page numbers, UTF-",
        "8 text included. The last line of a page has the para-",
    ], ["graph ends on the next page."]), ".pdf")
    text = converted.blocks[0].text
    assert "every document of" in text  # "document" is written whole elsewhere
    assert "KET-RAG builds" in text  # and "KET-RAG" with its hyphen
    assert "well-known" in text  # two words: a compound's hyphen
    assert "an information retrieval" in text  # a word of English
    assert "UTF-8 text" in text  # not between two letters: only the line break goes
    assert text.endswith("has the paragraph")  # on the page where it starts
    assert converted.blocks[1].text == "ends on the next page."


@pytest.mark.skipif(not DEJAVU.is_file(), reason="needs the DejaVu Sans font to print ligatures")
def test_a_pdf_spells_out_its_ligatures():
    text = convert(lines_pdf(["The ﬁrst ﬂoor of the oﬃce"], font=DEJAVU), ".pdf").blocks[0].text
    assert text == "The first floor of the office"


@pytest.fixture(scope="module")
def nlp():
    return load_pipeline(resolve_pipeline("en_core_web_sm"))


@pytest.fixture(scope="module")
def own(tmp_path_factory) -> tuple[own_docs.Folder, object]:
    """The project's docs as a folder of files, imported."""
    root = tmp_path_factory.mktemp("own")
    folder = own_docs.build(root / "docs")
    corpus = load_corpus({"dataset": "documents", "path": str(folder.path), "limit": None,
                          "questions": None, "fields": {}}, root)
    return folder, corpus


def test_the_docs_as_files_read_as_written(own, tokenizer: Tokenizer):
    folder, corpus = own
    chunks = with_sources(chunk_documents(corpus.documents, tokenizer, 256, 32),
                          corpus.sections)
    markup = chunks.filter(~chunks["file"].str.ends_with(".pdf"))
    assert markup.height > 100 and {f.split("/")[0] for f in markup["file"]} == {
        "md", "setext", "html"}
    assert markup["heading"].null_count() == 0  # every Markdown and HTML chunk
    pdf_ids = corpus.sections.filter(corpus.sections["file"] == "manual.pdf")["doc_id"]
    pdf = corpus.documents.filter(corpus.documents["doc_id"] == pdf_ids[0])["text"][0]
    source = "\n".join(page.read_text() for page in own_docs.PAGES)
    assert len(folder.splits) > 40
    left_split = [(left, right) for left, right in folder.splits
                  if re.search(rf"\b{left}-\s*{right}\b", pdf)
                  and f"{left}-{right}" not in source]
    assert left_split == []


def test_the_docs_phrase_nodes_are_phrases(own, nlp, tokenizer: Tokenizer):
    """The chunks that hold the Markdown pages' tables, and two dozen that hold the
    PDF's split words, as the extraction step reads them (all of the chunks would take
    half a minute to parse)."""
    folder, corpus = own
    chunks = with_sources(chunk_documents(corpus.documents, tokenizer, 256, 32),
                          corpus.sections)
    split = "|".join(rf"\b{left}-?{right}\b" for left, right in folder.splits)
    tables = chunks.filter(pl.col("file").str.starts_with("md/")
                           & pl.col("text").str.contains("\n|", literal=True))
    pdf = chunks.filter((pl.col("file") == "manual.pdf") & pl.col("text").str.contains(split))
    read = pl.concat([tables, pdf.head(24)])
    names = {e.name: e.type for doc in nlp.pipe(read["text"].to_list(), batch_size=64)
             for e in extract_parse(doc, None)[0]}
    assert len(names) > 500
    junk = {name for name, kind in names.items()
            if "|" in name or not (any(c.isalpha() for c in name)
                                   or (kind == "date" and re.fullmatch(r"\d{4}", name)))
            or re.search(r"\w- \w", name)}  # "KET- RAG": a word split at a line end
    assert junk == set()
