"""A folder of real documents (PDF written by fpdf2, DOCX by python-docx, HTML, Markdown,
text) imported through the converters: their known text, where each part came from, the
conversion cache and the files that give no text."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest
from fpdf import FPDF

from kgrag.corpus import Corpus, load_corpus
from kgrag.corpus.chunking import chunk_documents
from kgrag.corpus.convert import Unreadable, convert
from kgrag.corpus.sources import with_sources
from kgrag.corpus.tokenizer import Tokenizer

PAGES = ["The Louvre is a museum in Paris. It opened in 1793.",
         "The Rhone flows through Lyon and reaches the Mediterranean Sea."]


def pdf_bytes(pages: list[str], title: str | None = None, password: str | None = None) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    if title:
        pdf.set_title(title)
    if password is not None:
        pdf.set_encryption(owner_password="owner", user_password=password)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def image_only_pdf() -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 80, 60, style="F")  # drawn, with no text layer
    return bytes(pdf.output())


def docx_bytes(sections: list[tuple[str, list[str]]], title: str | None = None) -> bytes:
    document = docx.Document()
    if title:
        document.core_properties.title = title
    for heading, paragraphs in sections:
        document.add_heading(heading, level=1)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


HTML = ("<html><head><title>Cities of France</title><style>p {color: red}</style></head>"
        "<body><h1>Paris</h1><p>Paris is the <b>capital</b> of France.</p>"
        "<h2>Museums</h2><ul><li>The Louvre</li><li>The Orsay</li></ul>"
        "<div>Loose text in a div.</div><script>var hidden = 1;</script></body></html>")


def load(folder: Path, cache: Path | None = None, **options) -> Corpus:
    cfg = {"dataset": "documents", "path": str(folder), "limit": None, "questions": None,
           "fields": {}, **options}
    return load_corpus(cfg, folder.parent, cache)


def by_file(corpus: Corpus) -> dict[str, str]:
    """File → its document's text."""
    files = dict(zip(corpus.sections["doc_id"], corpus.sections["file"]))
    return {files[d]: t for d, t in zip(corpus.documents["doc_id"], corpus.documents["text"])}


def test_a_pdf_gives_its_pages_text_and_title():
    converted = convert(pdf_bytes(PAGES, title="Two places"), ".pdf")
    assert [b.text for b in converted.blocks] == PAGES
    assert [b.page for b in converted.blocks] == [1, 2]
    assert converted.title == "Two places"


def test_a_pdf_paragraph_wrapped_over_many_lines_reads_back_word_for_word():
    long = " ".join(f"Sentence {i} tells of the old bridge, built in {1800 + i}." for i in range(40))
    text = convert(pdf_bytes([long]), ".pdf").blocks[0].text
    assert "\n" in text and " ".join(text.split()) == long  # fpdf2 wrapped it into lines


def test_a_docx_gives_its_paragraphs_under_their_headings():
    converted = convert(docx_bytes([("Rivers", ["The Rhone flows through Lyon."]),
                                    ("Loire", ["The Loire is long.", "It ends at Nantes."])],
                                   title="French rivers"), ".docx")
    assert [(b.text, b.heading) for b in converted.blocks] == [
        ("Rivers", "Rivers"), ("The Rhone flows through Lyon.", "Rivers"),
        ("Loire", "Loire"), ("The Loire is long.", "Loire"), ("It ends at Nantes.", "Loire")]
    assert converted.title == "French rivers"


def test_an_html_page_gives_its_blocks_without_scripts_or_styles():
    converted = convert(HTML.encode(), ".html")
    assert [(b.text, b.heading) for b in converted.blocks] == [
        ("Paris", "Paris"), ("Paris is the capital of France.", "Paris"),
        ("Museums", "Museums"), ("The Louvre", "Museums"), ("The Orsay", "Museums"),
        ("Loose text in a div.", "Museums")]
    assert converted.title == "Cities of France"


@pytest.mark.parametrize(("title", "h1", "expected"), [
    # Sphinx: the page's heading, then the project's name and version
    ("collections — Container datatypes — Python 3.11.2 documentation",
     'collections — Container datatypes<a class="headerlink" href="#m">¶</a>',
     "collections — Container datatypes"),
    ("Installing | Acme Docs", "Installing", "Installing"),
    ("Paris in spring", "Paris", "Paris in spring"),  # no separator: the title's own words
    ("Cities of France", "Paris", "Cities of France"),  # another title than the heading
])
def test_an_html_pages_title_is_its_heading_less_the_sites_name(title, h1, expected):
    page = f"<html><head><title>{title}</title></head><body><h1>{h1}</h1><p>Text.</p>"
    assert convert(page.encode(), ".html").title == expected


def test_an_html_pages_permalink_anchors_are_no_words_of_it():
    """Sphinx writes a "¶" link after every heading and definition (the Python docs do);
    a "¶" that is the page's text stays."""
    page = ('<h1>heapq<a class="headerlink" href="#module-heapq">¶</a></h1>'
            '<dl><dt>heapq.heappush(heap, item)<a class="headerlink" href="#heapq.heappush">'
            '¶</a></dt><dd>Push the value item onto the heap.</dd></dl>'
            '<h2>Notes<a href="#notes">#</a></h2><p>A pilcrow (¶) marks a paragraph; '
            '<a href="#notes">see the notes</a>.</p>')
    converted = convert(page.encode(), ".html")
    assert [(b.text, b.heading) for b in converted.blocks] == [
        ("heapq", "heapq"), ("heapq.heappush(heap, item)", "heapq"),
        ("Push the value item onto the heap.", "heapq"), ("Notes", "Notes"),
        ("A pilcrow (¶) marks a paragraph; see the notes.", "Notes")]


def test_an_html_pages_navigation_search_and_footer_are_no_words_of_it():
    """A Sphinx page (the Python docs) lays its sidebar's table of contents, its search
    box and its related links out in elements marked as navigation, and its copyright
    lines in ``div.footer``; the body stays."""
    page = ('<div class="related" role="navigation"><h3>Navigation</h3><ul><li>index</li>'
            '<li>Python »</li></ul></div><nav class="menu"><p>Menu</p></nav>'
            '<div class="body" role="main"><h1>heapq</h1><p>Heap queue algorithm.</p>'
            '<form role="search"><p>Quick search</p></form></div>'
            '<div class="sphinxsidebar" role="navigation"><h3>Previous topic</h3>'
            '<p>calendar</p></div><div class="footer">© Copyright 2001.</div>')
    converted = convert(page.encode(), ".html")
    assert [(b.text, b.heading) for b in converted.blocks] == [
        ("heapq", "heapq"), ("Heap queue algorithm.", "heapq")]


def test_a_pages_footer_goes_and_a_quotations_footer_stays():
    page = ("<body><main><h1>Lyon</h1><blockquote><p>A city of lights.</p>"
            "<footer>Victor Hugo</footer></blockquote>"
            "<article><p>Lyon lies on the Rhone.</p><footer>By A. Writer</footer></article>"
            "</main><div><footer>© 2024 Example Inc. <a href='/terms'>Terms</a></footer></div>"
            "<div role='contentinfo'>Built with a generator.</div></body>")
    assert [b.text for b in convert(page.encode(), ".html").blocks] == [
        "Lyon", "A city of lights.", "Victor Hugo", "Lyon lies on the Rhone.", "By A. Writer"]


def test_the_spaces_between_inline_elements_part_their_words():
    """Between two links of a paragraph, or the highlighted tokens of a code line (as
    Sphinx writes them), the only text is a space: it stays."""
    page = ('<p><a href="/paris">Paris</a> <a href="/france">France</a></p>'
            '<pre><span class="kn">import</span> <span class="nn">secrets</span>\n'
            '<span class="n">url</span> <span class="o">=</span> <span>1</span></pre>')
    converted = convert(page.encode(), ".html")
    assert [b.text for b in converted.blocks] == ["Paris France", "import secrets\nurl = 1"]


def test_markdown_is_kept_as_written_and_cut_at_its_headings():
    text = "# Lyon\n\nLyon lies on the Rhone.\n\n## Food\nLyon is known for its food."
    converted = convert(text.encode(), ".md")
    assert "\n\n".join(b.text for b in converted.blocks) == text
    assert [b.heading for b in converted.blocks] == ["Lyon", "Food"]
    assert converted.title == "Lyon"


@pytest.mark.parametrize("data, suffix, kind", [
    (pdf_bytes(["a secret"], password="letmein"), ".pdf", "encrypted"),
    (image_only_pdf(), ".pdf", "no_text_layer"),
    (pdf_bytes(PAGES)[:300], ".pdf", "corrupt"),
    (b"PK\x03\x04 not really a zip", ".docx", "corrupt"),
    (b"{\\rtf1 hello}", ".rtf", "unsupported"),
    (b" \n\t\n", ".txt", "empty"),
    (b"<html><body><script>x()</script></body></html>", ".html", "empty"),
    ("café".encode("latin-1"), ".txt", "not_utf8"),
    ("<p>café</p>".encode("latin-1"), ".html", "not_utf8"),
])
def test_a_file_that_gives_no_text_says_why(data, suffix, kind):
    with pytest.raises(Unreadable) as caught:
        convert(data, suffix)
    assert caught.value.kind == kind


def test_a_pdf_with_only_an_owner_password_is_read():
    assert convert(pdf_bytes(PAGES, password=""), ".pdf").blocks[0].text == PAGES[0]


def document_bytes(kind: str, heading: str, fact: str) -> bytes:
    """A small real document of ``kind`` stating ``fact`` under ``heading``."""
    if kind == "pdf":
        return pdf_bytes([fact, f"Page two of {heading}."])
    if kind == "docx":
        return docx_bytes([(heading, [fact])])
    if kind == "html":
        return f"<h1>{heading}</h1><p>{fact}</p>".encode()
    if kind == "md":
        return f"# {heading}\n\n{fact}\n".encode()
    return f"{fact}\n".encode()


def mixed_folder(folder: Path, n: int = 20) -> dict[str, str]:
    """``n`` documents in five formats, each about a numbered town; file → a sentence
    its converted text must hold."""
    folder.mkdir(parents=True, exist_ok=True)
    known = {}
    for i in range(n):
        fact = f"Town {i} has {100 + i} bridges and a river called Riv{i}."
        kind = ("pdf", "docx", "html", "md", "txt")[i % 5]
        name = f"{kind}/town{i}.{kind}"
        (folder / kind).mkdir(exist_ok=True)
        (folder / name).write_bytes(document_bytes(kind, f"Town {i}", fact))
        known[name] = fact
    return known


def test_twenty_mixed_documents_import_with_their_known_text(tmp_path):
    known = mixed_folder(tmp_path / "docs")
    corpus = load(tmp_path / "docs")
    assert corpus.documents.height == 20
    assert set(corpus.sources["status"]) == {"converted"}
    texts = by_file(corpus)
    assert set(texts) == set(known)
    for name, fact in known.items():
        assert fact in texts[name], name
    pages = corpus.sections.filter(corpus.sections["file"] == "pdf/town0.pdf")["page"]
    assert pages.to_list() == [1, 2]


def test_a_warm_rerun_converts_nothing_and_a_new_file_alone_is_converted(tmp_path):
    folder = tmp_path / "docs"
    mixed_folder(folder, 10)
    cache = tmp_path / "converted"
    cold = load(folder, cache)
    assert set(cold.sources["status"]) == {"converted"}
    (folder / "extra.md").write_text("# Extra\n\nA new note about Town 99.\n")
    warm = load(folder, cache)
    statuses = dict(zip(warm.sources["file"], warm.sources["status"]))
    assert statuses.pop("extra.md") == "converted"
    assert set(statuses.values()) == {"cached"}
    # ids hash title and text: the cached documents read exactly as the converted ones
    assert set(cold.documents["doc_id"]) < set(warm.documents["doc_id"])
    again = load(folder, cache)
    assert set(again.sources["status"]) == {"cached"}
    assert again.documents.equals(warm.documents) and again.sections.equals(warm.sections)


def test_bad_files_are_recorded_and_the_rest_is_imported(tmp_path):
    folder = tmp_path / "docs"
    known = mixed_folder(folder, 5)
    (folder / "locked.pdf").write_bytes(pdf_bytes(["a secret"], password="letmein"))
    (folder / "scan.pdf").write_bytes(image_only_pdf())
    (folder / "broken.docx").write_bytes(b"not a zip at all")
    (folder / "slides.pptx").write_bytes(b"whatever")
    (folder / "blank.md").write_text("   \n")
    (folder / "latin.txt").write_bytes("Ça va, café crème.".encode("latin-1"))
    (folder / ".hidden.txt").write_text("never read")
    cache = tmp_path / "converted"
    for run in ("cold", "warm"):
        corpus = load(folder, cache)
        failures = {f: s for f, s in zip(corpus.sources["file"], corpus.sources["status"])
                    if s not in ("converted", "cached")}
        assert failures == {"locked.pdf": "encrypted", "scan.pdf": "no_text_layer",
                            "broken.docx": "corrupt", "slides.pptx": "unsupported",
                            "blank.md": "empty", "latin.txt": "not_utf8"}, run
        assert set(by_file(corpus)) == set(known)


def test_each_chunk_says_its_file_page_and_heading(tmp_path, tokenizer: Tokenizer):
    folder = tmp_path / "docs"
    folder.mkdir()
    long_page = " ".join(f"Sentence {i} about the museum." for i in range(40))
    (folder / "guide.pdf").write_bytes(pdf_bytes([long_page, long_page.replace("museum", "park")]))
    (folder / "rivers.docx").write_bytes(docx_bytes([("Rhone", ["The Rhone is fast."]),
                                                      ("Loire", ["The Loire is slow."])]))
    corpus = load(folder)
    chunks = with_sources(chunk_documents(corpus.documents, tokenizer, 64, 8), corpus.sections)
    guide = chunks.filter(chunks["file"] == "guide.pdf")
    assert guide["page"].to_list()[0] == 1 and guide["page_end"].to_list()[-1] == 2
    for text, page, page_end in zip(guide["text"], guide["page"], guide["page_end"]):
        assert ("park" in text) == (page_end == 2) and ("museum" in text) == (page == 1)
    rivers = chunks.filter(chunks["file"] == "rivers.docx")
    assert rivers["heading"].to_list() == ["Rhone"] and rivers["page"].to_list() == [None]


def test_a_questions_file_names_documents_by_their_path(tmp_path):
    folder = tmp_path / "docs"
    mixed_folder(folder, 5)
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "How many bridges has Town 0?", '
                         '"answers": ["100"], "supporting": ["pdf/town0.pdf"]}\n')
    corpus = load(folder, questions_file=str(questions))
    files = dict(zip(corpus.sections["doc_id"], corpus.sections["file"]))
    assert [files[d] for d in corpus.questions["supporting_doc_ids"][0]] == ["pdf/town0.pdf"]
