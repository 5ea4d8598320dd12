"""What a file may cost its converter, judged before the converter reads it: an HTML
page's parse (lexbor's time and tree) and a DOCX file's inflation (python-docx reads every
part whole). Each check is linear in the file's bytes and returns why the file is refused,
or None; ``kgrag.corpus.convert`` turns a refusal into the file's ``Unreadable`` verdict.

These are estimates of what the readers will do, measured on them
(``benchmarks/document_bombs.py``), not a sandbox: they catch what a file can make a
reader do by its shape (nesting, attribute lists, node counts, declared sizes and ratios),
the bombs a folder of exports or a hostile upload holds.
"""

from __future__ import annotations

import io
import re
import zipfile

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
# Steps of the parser's quadratic walks (see ``html_refusal``); lexbor makes about 50
# million a second, so this is a few seconds at most.
HTML_MAX_WORK = 100_000_000
# A DOCX file's zip entries are inflated into memory whole, and their XML parsed.
DOCX_MAX_INFLATED = 128 * 2**20
ZIP_MAX_RATIO = 100  # deflate reaches about 1,000:1 on repeated bytes; Word's XML 10-40:1
ZIP_RATIO_FLOOR = 2**20  # an entry smaller than this may have any ratio


def html_refusal(text: str) -> str | None:
    """Why a page's parse would cost far more than its size says, or None when it would not.

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
        return f"more than {HTML_MAX_ELEMENTS:,} elements and comments"
    if work > HTML_MAX_WORK:
        return (f"its tags nest too deep or hold too many attributes to parse in bounded "
                f"time ({HTML_MAX_WORK:,} steps)")
    return None


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


def zip_refusal(data: bytes) -> str | None:
    """Why a DOCX file's zip is a bomb, judged from the sizes its entries declare before
    anything is inflated; None when it is not. Raises ``zipfile.BadZipFile`` for bytes
    that are not a zip.

    python-docx inflates every part it reads into memory and parses the XML ones; Python's
    zipfile stops inflating a deflated entry at its declared size, so declared sizes bound
    what reading costs. An entry compressed some other way (bzip2, lzma: Word writes
    neither) is inflated whole before that cut, so it is refused too."""
    entries = zipfile.ZipFile(io.BytesIO(data)).infolist()
    inflated = sum(entry.file_size for entry in entries)
    if inflated > DOCX_MAX_INFLATED:
        return (f"a zip bomb? its entries inflate to {inflated / 2**20:,.0f} MB, more than "
                f"{DOCX_MAX_INFLATED / 2**20:.0f} MB")
    for entry in entries:
        if entry.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return (f"{entry.filename} is compressed with method {entry.compress_type}, "
                    "which DOCX files do not use")
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size > ZIP_RATIO_FLOOR and ratio > ZIP_MAX_RATIO:
            return (f"a zip bomb? {entry.filename} inflates {ratio:,.0f} times, more than "
                    f"{ZIP_MAX_RATIO}")
    return None
