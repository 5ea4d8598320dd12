"""Convert one document file (PDF, HTML, Markdown, DOCX, plain text) into text blocks that
remember where they came from: the PDF page, the section heading above them.

Each format is read by a well-kept library, never parsed by hand: pypdf for a PDF's text
layer (page by page, so a chunk can cite its page), python-docx for a Word file's
paragraphs and their heading styles, selectolax for an HTML page's block elements and
headings, markdown-it-py for where a Markdown file's headings are. Markdown and plain
text are UTF-8 text, kept as they are (a Markdown document reads exactly as in a
``text`` corpus); a PDF's words are mended where its typesetting split or joined them
(``kgrag.corpus.hyphens``). These
libraries were chosen over MarkItDown and Docling for their install weight (MarkItDown's
PDF and DOCX extras pull pdfminer, cryptography and a model runtime; Docling pulls layout
models from a hub) and because pypdf keeps page numbers.

A file that cannot give text raises ``Unreadable`` with one of ``FAILURES``' kinds, so
the importer records it, counts it and goes on with the rest of the folder; an HTML page
or a DOCX file that would cost its reader far more than its size (a zip bomb, 100,000
nested elements) is refused before the reader sees it (``kgrag.corpus.bounds``).
"""

from __future__ import annotations

import io
import itertools
import logging
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kgrag.corpus.bounds import html_refusal, zip_refusal
from kgrag.corpus.hyphens import rejoin_line_ends, spell_out_ligatures

# Bump when a converter changes what it returns: cached conversions carry the version.
CONVERTER_VERSION = "6"

FAILURES = {
    "encrypted": "an encrypted PDF that opens only with a password",
    "no_text_layer": "a PDF without a text layer (scanned images?)",
    "corrupt": "a damaged or mislabelled file its format's reader rejects",
    "unsupported": "an extension no converter reads",
    "empty": "a document without text",
    "not_utf8": "text that is not UTF-8",
    "too_large": "a file above corpus.max_file_mb, left unread",
    "too_complex": "an HTML page with more elements, or deeper nesting, than it is safe to parse",
    "vanished": "a file moved or deleted while the folder was being imported",
}

_SPACES = re.compile(r"[ \t\r\f\v]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # CommonMark's line endings
# The HTML elements whose text is one block; a heading element starts a section.
_HTML_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_HTML_BLOCKS = _HTML_HEADINGS | {"p", "li", "pre", "blockquote", "td", "th", "dt", "dd",
                                 "figcaption", "caption"}
# Elements that only group blocks: text directly inside one is a block of its own.
_HTML_LAYOUT = _HTML_BLOCKS | {"body", "div", "section", "article", "main", "header", "footer",
                               "aside", "form", "table", "tr", "ul", "ol", "dl",
                               "figure", "address", "details", "summary"}
_HTML_SKIPPED = ["script", "style", "noscript", "template", "head"]
# The page's navigation, search and footer (HTML's ``nav``, ARIA's landmark roles,
# Sphinx's ``div.footer``): a generator's sidebar, table of contents, "Previous topic"
# links and copyright lines, not words of the document.
_HTML_CHROME = 'nav, [role="navigation"], [role="search"], [role="contentinfo"], div.footer'
# A ``footer`` element is the page's own (its copyright, its links) unless it closes a
# part of the page: a quotation's source, an article's byline are the document's words.
_HTML_SECTIONS = frozenset({"article", "aside", "main", "section", "blockquote"})
# What a documentation generator writes after a heading or a definition as its permalink
# (Sphinx's "¶", MkDocs' "¶" or "#", others' "§" or a link symbol): an anchor into the
# page with this text alone is a button, not words of the document.
_PERMALINK_MARKS = frozenset({"¶", "#", "§", "🔗", "\uf0c1"})
_SITE_SUFFIX = re.compile(r"\s+[—–|·-]\s+\S")  # " — Python 3.11.2 documentation"


class Unreadable(Exception):
    """A file that gives no text; ``kind`` is one of ``FAILURES``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


@dataclass(frozen=True, slots=True)
class Block:
    """A run of a document's text, with the PDF page it is on (1-based; None for other
    formats) and the heading of the section it belongs to (None before the first).
    Slotted: a page of a million paragraphs is a million blocks."""

    text: str
    page: int | None = None
    heading: str | None = None


@dataclass(frozen=True)
class Converted:
    """A document's text as blocks, and its own title where the file names one (an HTML
    ``<title>``, a PDF's or DOCX's title property, a Markdown file's first heading)."""

    blocks: tuple[Block, ...]
    title: str | None = None


def convert(data: bytes, suffix: str) -> Converted:
    """The text of a file's bytes, by its (lower-case) suffix; raises ``Unreadable``."""
    reader = CONVERTERS.get(suffix)
    if reader is None:
        raise Unreadable("unsupported", f"no converter reads {suffix or 'files without a suffix'}")
    converted = reader(data)
    blocks = tuple(b for b in converted.blocks if b.text.strip())
    if not blocks:
        raise Unreadable("empty", "the document holds no text")
    return Converted(blocks, converted.title)


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable("not_utf8", f"byte {exc.start} is not UTF-8 ({exc.reason})") from None


def _plain(data: bytes) -> Converted:
    return Converted((Block(_utf8(data).strip()),))


def _markdown(data: bytes) -> Converted:
    """The file's text unchanged, cut into sections where its headings start: ``#``
    lines and setext headings (a line underlined by ``===`` or ``---``), as CommonMark
    reads them, so that a ``#`` line in a code block is code."""
    from markdown_it import MarkdownIt

    text = _utf8(data).strip()
    line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
    tokens = MarkdownIt("commonmark").parse(text)
    found = ((line_starts[opening.map[0]], _inline_text(inline))
             for opening, inline in itertools.pairwise(tokens)
             if opening.type == "heading_open" and opening.map is not None)
    headings = {start: heading for start, heading in found if heading}  # in text order
    cuts = sorted({0, *headings})
    blocks = tuple(Block(text[start:end].strip(), None, headings.get(start))
                   for start, end in zip(cuts, [*cuts[1:], len(text)]))
    return Converted(blocks, next(iter(headings.values()), None))


def _inline_text(inline: Any) -> str:
    """A heading's words as a reader sees them: ``The `kgrag` CLI`` reads "The kgrag CLI"."""
    words = [child.content if child.type in ("text", "code_inline") else " "
             for child in inline.children or [] if child.type in
             ("text", "code_inline", "softbreak", "hardbreak")]
    return _one_line("".join(words))


def _html(data: bytes) -> Converted:
    """One block per run of text under the same block element (a paragraph, a list item,
    a heading, a ``div``'s own loose text), in document order, less the page's
    navigation and footer (``_HTML_CHROME``); a heading's text starts a section."""
    from selectolax.lexbor import LexborHTMLParser

    text = _utf8(data)
    refused = html_refusal(text)
    if refused:
        raise Unreadable("too_complex", refused)
    tree = LexborHTMLParser(text)
    title_node = tree.css_first("title")
    title = _one_line(title_node.text()) if title_node is not None else None
    tree.strip_tags(_HTML_SKIPPED)
    for chrome in tree.css(_HTML_CHROME):
        chrome.decompose()
    for footer in tree.css("footer"):
        if not any(parent.tag in _HTML_SECTIONS for parent in _ancestors(footer)):
            footer.decompose()
    for anchor in tree.css('a[href^="#"]'):
        if anchor.text(strip=True) in _PERMALINK_MARKS:
            anchor.decompose()
    root = tree.body or tree.root
    runs: list[tuple[Any, list[str]]] = []  # (block element, its texts)
    owners: dict[int, Any] = {}
    for node in ([] if root is None else root.traverse(include_text=True)):
        content = node.text_content
        if node.tag != "-text" or content is None:
            continue
        owner = _block_of(node, owners)
        if runs and runs[-1][0].mem_id == owner.mem_id:
            # a space between two inline elements ("<b>a</b> <i>b</i>", a highlighted
            # code line's tokens) is the text's own: it parts their words
            runs[-1][1].append(content)
        elif content.strip():
            runs.append((owner, [content]))
    blocks, heading, first_h1 = [], None, None
    for owner, texts in runs:
        text = "".join(texts).strip() if owner.tag == "pre" else _one_line("".join(texts))
        if owner.tag in _HTML_HEADINGS:
            heading = text
            first_h1 = text if first_h1 is None and owner.tag == "h1" else first_h1
        blocks.append(Block(text, None, heading))
    return Converted(tuple(blocks), _own_title(title, first_h1) or None)


def _own_title(title: str | None, h1: str | None) -> str | None:
    """A page's ``<title>`` less the site's name that it adds to the page's first
    heading: Sphinx titles the page ``collections — Container datatypes`` as
    "collections — Container datatypes — Python 3.11.2 documentation", and many sites
    write "Page | Site". The title is the heading where it is the heading, a separator
    (a dash, a bar, a middle dot) and more; else the ``<title>`` as it is. The site's
    name would otherwise open every chunk's title line, and be an answer's words."""
    if title and h1 and title.startswith(h1) and _SITE_SUFFIX.match(title, len(h1)):
        return h1
    return title


def _ancestors(node: Any) -> Iterator[Any]:
    while node.parent is not None:
        node = node.parent
        yield node


def _block_of(node: Any, owners: dict[int, Any]) -> Any:
    """The nearest enclosing element that lays its text out as a block of its own.

    ``owners`` remembers it for every inline element walked through, so that the texts
    of a deep nest of inline elements (``<span>`` in ``<span>`` ...) cost one walk up, not
    one each: without it, 10,000 nested spans took 38 s."""
    walked = []
    parent = node.parent
    while parent.tag not in _HTML_LAYOUT and parent.parent is not None:
        known = owners.get(parent.mem_id)
        if known is not None:
            parent = known
            break
        walked.append(parent.mem_id)
        parent = parent.parent
    if walked:
        owners.update(dict.fromkeys(walked, parent))
    return parent


def _docx(data: bytes) -> Converted:
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml import etree

    try:
        refused = zip_refusal(data)
        if refused:
            raise Unreadable("corrupt", refused)
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, EOFError,
            zlib.error, etree.XMLSyntaxError) as exc:  # zlib, EOF: a deflate stream damaged
        raise Unreadable("corrupt", f"not a readable DOCX file ({exc})") from None
    blocks, heading = [], None
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = paragraph.style.name if paragraph.style is not None else ""
        if style.startswith("Heading") or style == "Title":
            heading = text
        blocks.append(Block(text, None, heading))
    return Converted(tuple(blocks), document.core_properties.title.strip() or None)


def _pdf(data: bytes) -> Converted:
    """A damaged PDF makes pypdf log warnings as it repairs what it can; the file's one
    message is its ``Unreadable`` (or none, when the repair worked)."""
    pypdf_log = logging.getLogger("pypdf")
    level = pypdf_log.level
    pypdf_log.setLevel(logging.ERROR)
    try:
        return _read_pdf(data)
    finally:
        pypdf_log.setLevel(level)


def _read_pdf(data: bytes) -> Converted:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opens_without_password(reader):
            raise Unreadable("encrypted", "the PDF needs a password to be read")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = None if reader.metadata is None else reader.metadata.get("/Title")
    except (FileNotDecryptedError, DependencyError) as exc:
        raise Unreadable("encrypted", f"the PDF cannot be decrypted ({exc})") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, EOFError,
            zlib.error, NotImplementedError) as exc:  # the last: a filter name damaged
        raise Unreadable("corrupt", f"not a readable PDF ({exc})") from None
    pages = rejoin_line_ends([_tidy(spell_out_ligatures(text)) for text in pages])
    blocks = [Block(text, number) for number, text in enumerate(pages, 1)]
    if not any(b.text for b in blocks):
        raise Unreadable("no_text_layer", f"none of its {len(pages)} pages has text")
    return Converted(tuple(blocks), _one_line(str(title)) if title else None)


def _opens_without_password(reader) -> bool:
    """An encrypted PDF with only an owner password (print or copy restrictions) opens
    with the empty user password; one with a user password does not."""
    return bool(reader.decrypt(""))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _tidy(text: str) -> str:
    """A page's text with runs of spaces collapsed and blank-line runs cut to one."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


CONVERTERS: dict[str, Callable[[bytes], Converted]] = {
    ".pdf": _pdf,
    ".html": _html,
    ".htm": _html,
    ".md": _markdown,
    ".docx": _docx,
    ".txt": _plain,
}
