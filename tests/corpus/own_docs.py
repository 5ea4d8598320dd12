"""The project's own documentation as a folder of real documents, the way other projects
publish theirs: the Markdown pages as written and in setext style (``Title`` over
``===``), one PDF typeset by fpdf2 with words hyphenated at line ends, and HTML pages
that open with a preamble before their first heading. The tests of how documents are
read use it, and so does ``benchmarks/document_reading.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fpdf import FPDF
from markdown_it import MarkdownIt

DOCS = Path(__file__).resolve().parents[2] / "docs"
# Every page but the results, 115 KB of tables that would only slow the parse down.
PAGES = tuple(sorted(p for p in DOCS.glob("*.md") if p.name != "results.md"))
LINE_CHARACTERS = 84  # a line of the PDF, in characters: fits an A4 page at 10 pt
_ATX = re.compile(r"^(#{1,2}) +(.+?) *$", re.MULTILINE)
_LETTERS = re.compile(r"([A-Za-z]+)[.,;:!?)]*$")
_CODE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Folder:
    """The folder, and the words the PDF split at a line end (their two parts)."""

    path: Path
    splits: tuple[tuple[str, str], ...]


def build(folder: Path) -> Folder:
    """``md/`` the pages as written, ``setext/`` the same with setext headings,
    ``html/`` each page rendered with a preamble, ``manual.pdf`` all of them typeset."""
    for part in ("md", "setext", "html"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    texts = {page.stem: page.read_text(encoding="utf-8") for page in PAGES}
    for name, text in texts.items():
        (folder / "md" / f"{name}.md").write_text(text, encoding="utf-8")
        (folder / "setext" / f"{name}.md").write_text(setext(text), encoding="utf-8")
        (folder / "html" / f"{name}.html").write_text(html(name, text), encoding="utf-8")
    splits = typeset(list(texts.values()), folder / "manual.pdf")
    return Folder(folder, splits)


def setext(text: str) -> str:
    """Level-1 and level-2 ``#`` headings (outside code blocks) written setext style."""
    code = [m.span() for m in _CODE.finditer(text)]

    def underline(found: re.Match[str]) -> str:
        if any(start <= found.start() < end for start, end in code):
            return found.group()
        title = found.group(2)
        return f"{title}\n{('=' if len(found.group(1)) == 1 else '-') * len(title)}"

    return _ATX.sub(underline, text)


def html(name: str, text: str) -> str:
    """The page as HTML, after a site's navigation line and a lead paragraph that come
    before its first heading."""
    return (f"<html><head><title>{name}</title></head><body>"
            f"<nav><p>kgrag documentation: home, spec, operations, documents</p></nav>"
            f"<p>This page is part of kgrag's documentation, kept with its code.</p>"
            f"{MarkdownIt('commonmark').render(text)}</body></html>")


def typeset(texts: list[str], path: Path) -> tuple[tuple[str, str], ...]:
    """The texts as one PDF, paragraph after paragraph, in lines of ``LINE_CHARACTERS``
    at most; a long word that overflows a line is hyphenated there, as a typesetter
    does. Returns the split words' parts."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.set_auto_page_break(True, margin=15)
    pdf.add_page()
    splits: list[tuple[str, str]] = []
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text):
            for line in _lines(paragraph.split(), splits):
                pdf.cell(0, 5, line.encode("latin-1", "replace").decode("latin-1"),
                         new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    pdf.output(str(path))
    return tuple(splits)


def _lines(words: list[str], splits: list[tuple[str, str]]) -> list[str]:
    lines, line = [], ""
    for word in words:
        room = LINE_CHARACTERS - len(line) - (1 if line else 0)
        if len(word) <= room:
            line = f"{line} {word}" if line else word
            continue
        cut = room - 1  # letters that fit before the hyphen
        letters = _LETTERS.match(word)  # a word, perhaps followed by punctuation
        if letters and 3 <= cut <= len(letters.group(1)) - 3:
            lines.append(f"{line} {word[:cut]}-" if line else f"{word[:cut]}-")
            splits.append((word[:cut], letters.group(1)[cut:]))
            line = word[cut:]
        else:
            lines += [line] if line else []
            line = word
    return [*lines, line] if line else lines
