"""Convert one document file (PDF, HTML, Markdown, DOCX, plain text) into text blocks that
remember where they came from: the PDF page, the section heading above them.

Each format is read by a well-kept library, never parsed by hand: pypdf for a PDF's text
layer (page by page, so a chunk can cite its page), python-docx for a Word file's
paragraphs and their heading styles, selectolax for an HTML page's block elements and
headings. Markdown and plain text are UTF-8 text, kept as they are (a Markdown document
reads exactly as in a ``text`` corpus), with Markdown's ``#`` lines as headings. These
libraries were chosen over MarkItDown and Docling for their install weight (MarkItDown's
PDF and DOCX extras pull pdfminer, cryptography and a model runtime; Docling pulls layout
models from a hub) and because pypdf keeps page numbers.

A file that cannot give text raises ``Unreadable`` with one of ``FAILURES``' kinds, so
the importer records it, counts it and goes on with the rest of the folder.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Bump when a converter changes what it returns: cached conversions carry the version.
CONVERTER_VERSION = "1"

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
_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
# The HTML elements whose text is one block; a heading element starts a section.
_HTML_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_HTML_BLOCKS = _HTML_HEADINGS | {"p", "li", "pre", "blockquote", "td", "th", "dt", "dd",
                                 "figcaption", "caption"}
# Elements that only group blocks: text directly inside one is a block of its own.
_HTML_LAYOUT = _HTML_BLOCKS | {"body", "div", "section", "article", "main", "header", "footer",
                               "aside", "nav", "form", "table", "tr", "ul", "ol", "dl",
                               "figure", "address", "details", "summary"}
_HTML_SKIPPED = ["script", "style", "noscript", "template", "head"]
# A tag, its name and its attributes (quoted values kept whole, as the parser reads them).
_HTML_TAG = re.compile(r"""<(/?)([A-Za-z][^\s/>]*+)((?:[^"'>]++|"[^"]*+"|'[^']*+')*+)""")
_HTML_QUOTED = re.compile(r""""[^"]*+"|'[^']*+'""")
_HTML_WORD = re.compile(r"\S+")
# Elements that hold no others (void) or that the parser closes by itself when the next
# one opens (optional end tags): they do not deepen the stack of open elements.
_HTML_FLAT = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
                        "meta", "source", "track", "wbr", "p", "li", "dt", "dd", "tr", "td",
                        "th", "option", "optgroup", "rb", "rt", "rp", "rtc", "tbody", "thead",
                        "tfoot", "colgroup", "caption", "html", "head", "body"})
# Elements an end tag does not close from inside: the "special" ones of the HTML
# standard's parser (for the end tag of another element) and its scope boundaries (for
# the end tag of a special one).
_HTML_SPECIAL = frozenset({"address", "applet", "area", "article", "aside", "base", "basefont",
                           "bgsound", "blockquote", "body", "br", "button", "caption", "center",
                           "col", "colgroup", "dd", "details", "dir", "div", "dl", "dt",
                           "embed", "fieldset", "figcaption", "figure", "footer", "form",
                           "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head",
                           "header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen",
                           "li", "link", "listing", "main", "marquee", "menu", "meta", "nav",
                           "noembed", "noframes", "noscript", "object", "ol", "p", "param",
                           "plaintext", "pre", "script", "search", "section", "select",
                           "source", "style", "summary", "table", "tbody", "td", "template",
                           "textarea", "tfoot", "th", "thead", "title", "tr", "track", "ul",
                           "wbr", "xmp"})
_HTML_SCOPE = frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object",
                         "template", "foreignobject"})
# SVG and MathML, where ``<path/>`` closes itself, and the HTML tags that end them.
_HTML_FOREIGN = frozenset({"svg", "math"})
_HTML_BREAKOUT = frozenset({"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div",
                            "dl", "dt", "em", "embed", "h1", "h2", "h3", "h4", "h5", "h6", "head",
                            "hr", "i", "img", "li", "listing", "menu", "meta", "nobr", "ol", "p",
                            "pre", "ruby", "s", "small", "span", "strong", "strike", "sub",
                            "sup", "table", "tt", "u", "ul", "var"})
# lexbor's tree takes about 330 bytes an element, the blocks made of them as much again:
# a page of a million one-word paragraphs peaks near 700 MB.
HTML_MAX_ELEMENTS = 1_000_000
# Steps of the parser's quadratic walks (see ``_html_bounded``); lexbor makes about 50
# million a second, so this is a few seconds at most.
HTML_MAX_WORK = 100_000_000
# A DOCX file's zip entries are inflated into memory whole, and their XML parsed.
DOCX_MAX_INFLATED = 128 * 2**20
ZIP_MAX_RATIO = 100  # deflate reaches about 1,000:1 on repeated bytes; Word's XML 10-40:1
ZIP_RATIO_FLOOR = 2**20  # an entry smaller than this may have any ratio


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
    """The file's text unchanged, cut into sections at its ``#`` heading lines."""
    text = _utf8(data).strip()
    headings = list(_MD_HEADING.finditer(text))
    cuts = [0, *(m.start() for m in headings if m.start() > 0)]
    blocks = []
    for start, end in zip(cuts, [*cuts[1:], len(text)]):
        found = _MD_HEADING.match(text, start)
        blocks.append(Block(text[start:end].strip(), None,
                            found.group(2).strip() if found else None))
    return Converted(tuple(blocks), headings[0].group(2).strip() if headings else None)


def _html(data: bytes) -> Converted:
    """One block per run of text under the same block element (a paragraph, a list item,
    a heading, a ``div``'s own loose text), in document order; a heading's text starts
    a section."""
    from selectolax.lexbor import LexborHTMLParser

    text = _utf8(data)
    _html_bounded(text)
    tree = LexborHTMLParser(text)
    title_node = tree.css_first("title")
    title = _one_line(title_node.text()) if title_node is not None else None
    tree.strip_tags(_HTML_SKIPPED)
    root = tree.body or tree.root
    runs: list[tuple[Any, list[str]]] = []  # (block element, its texts)
    owners: dict[int, Any] = {}
    for node in ([] if root is None else root.traverse(include_text=True)):
        if node.tag != "-text" or not (node.text_content or "").strip():
            continue
        owner = _block_of(node, owners)
        if runs and runs[-1][0].mem_id == owner.mem_id:
            runs[-1][1].append(node.text_content)
        else:
            runs.append((owner, [node.text_content]))
    blocks, heading = [], None
    for owner, texts in runs:
        text = "".join(texts).strip() if owner.tag == "pre" else _one_line("".join(texts))
        if owner.tag in _HTML_HEADINGS:
            heading = text
        blocks.append(Block(text, None, heading))
    return Converted(tuple(blocks), title or None)


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


def _html_bounded(text: str) -> None:
    """Refuse (``too_complex``) a page whose parse would cost far more than its size says.

    lexbor, like every HTML5 parser, keeps a stack of open elements and looks down it at
    most tags (is a ``<p>`` open? which element does this end tag close?), and compares
    each attribute's name with the element's earlier ones: 100,000 nested ``<div>`` or
    one element with 100,000 attributes is minutes of work in a file of a few hundred KB.
    Its tree also takes a few hundred bytes a node (an element, a comment), whatever the
    node's size. A scan of the tags (linear, before anything is parsed) counts the nodes
    and bounds that work: the depth of open elements at each tag plus the square of its
    attributes. The depth is the parser's as far as a scan can follow it (elements that
    close themselves are left out, end tags close what the parser would close): an
    estimate, meant to err deep.
    """
    open_names: list[str] = []
    work = foreign = 0  # foreign: open svg / math elements
    elements = text.count("<!") + text.count("<?")  # comments are nodes of the tree too
    for match in _HTML_TAG.finditer(text):
        closing, name, attributes = match.groups()
        name = name.lower()
        work += len(open_names)
        if closing:  # an element left out of the stack closes nothing in it
            closed = (None if name in _HTML_FLAT else len(open_names) - 1
                      if open_names and open_names[-1] == name else _closed_by(open_names, name))
        else:
            elements += 1
            if attributes:
                work += _attribute_names(attributes) ** 2
            closed = None
            if foreign and name in _HTML_BREAKOUT:  # HTML inside svg ends the svg
                closed = len(open_names) - 1 - next(
                    i for i, n in enumerate(reversed(open_names)) if n in _HTML_FOREIGN)
        if work > HTML_MAX_WORK or elements > HTML_MAX_ELEMENTS:
            break
        if closed is not None:
            del open_names[closed:]
            foreign = sum(map(open_names.count, _HTML_FOREIGN)) if foreign else 0
        if closing or name in _HTML_FLAT or (
                attributes.endswith("/") and (foreign or name in _HTML_FOREIGN)):
            continue
        open_names.append(name)
        foreign += name in _HTML_FOREIGN
    if elements > HTML_MAX_ELEMENTS:
        raise Unreadable("too_complex", f"more than {HTML_MAX_ELEMENTS:,} elements and comments")
    if work > HTML_MAX_WORK:
        raise Unreadable("too_complex", f"its tags nest too deep or hold too many attributes "
                         f"to parse in bounded time ({HTML_MAX_WORK:,} steps)")


def _attribute_names(attributes: str) -> int:
    """How many attributes a tag's text after its name holds: its words outside quoted
    values (a short text's words, quoted or not: too few to matter)."""
    if len(attributes) < 64:
        return len(attributes.split())
    return sum(1 for _ in _HTML_WORD.finditer(_HTML_QUOTED.sub("", attributes)))


def _closed_by(open_names: list[str], name: str) -> int | None:
    """Where an end tag cuts the stack of open elements: at its element, unless an element
    the parser does not close from inside lies above it (then the tag is ignored), or it
    lies deeper than the scan looks (then it errs deep)."""
    barriers = _HTML_SCOPE if name in _HTML_SPECIAL else _HTML_SPECIAL
    for index in range(len(open_names) - 1, max(len(open_names) - 65, -1), -1):
        if open_names[index] == name:
            return index
        if open_names[index] in barriers:
            return None
    return None


def _docx(data: bytes) -> Converted:
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml import etree

    try:
        _zip_bounded(data)
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError,
            etree.XMLSyntaxError) as exc:
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


def _zip_bounded(data: bytes) -> None:
    """Refuse a zip bomb from the sizes its entries declare, before anything is inflated.

    python-docx inflates every part it reads into memory and parses the XML ones; Python's
    zipfile stops inflating a deflated entry at its declared size, so declared sizes bound
    what reading costs. An entry compressed some other way (bzip2, lzma: Word writes
    neither) is inflated whole before that cut, so it is refused too."""
    entries = zipfile.ZipFile(io.BytesIO(data)).infolist()
    inflated = sum(entry.file_size for entry in entries)
    if inflated > DOCX_MAX_INFLATED:
        raise Unreadable("corrupt", f"a zip bomb? its entries inflate to {inflated / 2**20:,.0f}"
                         f" MB, more than {DOCX_MAX_INFLATED / 2**20:.0f} MB")
    for entry in entries:
        if entry.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise Unreadable("corrupt", f"{entry.filename} is compressed with method "
                             f"{entry.compress_type}, which DOCX files do not use")
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size > ZIP_RATIO_FLOOR and ratio > ZIP_MAX_RATIO:
            raise Unreadable("corrupt", f"a zip bomb? {entry.filename} inflates {ratio:,.0f}"
                             f" times, more than {ZIP_MAX_RATIO}")


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
        title = (reader.metadata or {}).get("/Title")
    except (FileNotDecryptedError, DependencyError) as exc:
        raise Unreadable("encrypted", f"the PDF cannot be decrypted ({exc})") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Unreadable("corrupt", f"not a readable PDF ({exc})") from None
    blocks = [Block(_tidy(text), number) for number, text in enumerate(pages, 1)]
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
