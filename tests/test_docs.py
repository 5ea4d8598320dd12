"""Every relative link in README.md and docs/ leads somewhere.

The README is a map of docs/, and the pages link one another by section; a page renamed
or a heading reworded would otherwise leave a link that silently goes nowhere. A link
is checked the way GitHub renders it: the file must exist (relative to the page), and an
``#anchor`` must be one that a heading of the target page produces (GitHub's rule: the
heading's text lowercased, everything but letters, digits, ``_``, ``-`` and spaces
dropped, spaces turned into ``-``; a repeated heading gets ``-1``, ``-2``…). Links in
code blocks and code spans are text, not links; links to other sites are not followed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def pages(repo: Path = REPO) -> list[Path]:
    """The README and every markdown page under docs/."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def _prose(text: str) -> Iterator[str]:
    """The lines of a markdown page outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text (before numbering repeats)."""
    parts = CODE_SPAN.split(heading)  # prose, backticks, code, prose, …
    rendered = "".join(
        part if i % 3 == 2 else "" if i % 3 == 1 else
        re.sub(r"\*+|(?<!\w)_+|_+(?!\w)", "",  # emphasis markers
               re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", part))  # a link's text only
        for i, part in enumerate(parts))
    return re.sub(r"[^\w\- ]", "", rendered.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor the page's headings produce, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file or anchor does not exist, as text."""
    broken = []
    for target in links(page):
        if not target or EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.name}: {target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{page.name}: {target}: no heading gives #{anchor}")
    return broken


def links(page: Path) -> list[str]:
    """The target of every link and image of the page's prose (a link's text may wrap)."""
    prose = "\n".join(_prose(page.read_text(encoding="utf-8")))
    return LINK.findall(CODE_SPAN.sub("", prose))


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links(REPO / "README.md")}
    assert [page.relative_to(REPO).as_posix() for page in pages()[1:]
            if page.resolve() not in linked] == []


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_a_missing_page_or_anchor_is_caught(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Results: `ppr` (MuSiQue)\n\n"
                                       "## Results: `ppr` (MuSiQue)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Fine\n\n"
        "[ok](other.md) [ok](other.md#results-ppr-musique) [ok](other.md#results-ppr-musique-1)"
        " [ok](#fine) [web](https://example.org/x.md#nowhere)\n"
        "[gone](missing.md) [bad anchor](other.md#results-ppr-musique-2) [a link\n"
        "that wraps](#nope)\n"
        "`[code](missing-in-a-code-span.md)`\n\n```\n[fenced](missing-in-a-fence.md)\n```\n")
    assert broken_links(page) == [
        "page.md: missing.md: no file missing.md",
        "page.md: other.md#results-ppr-musique-2: no heading gives #results-ppr-musique-2",
        "page.md: #nope: no heading gives #nope"]


def test_anchors_follow_githubs_rule() -> None:
    assert slug("Quickstart (`make demo`: 30 MuSiQue questions, Gemma 3 270M)") == (
        "quickstart-make-demo-30-musique-questions-gemma-3-270m")
    assert slug("Extraction methods: `llm`, `nlp` or `hybrid`") == (
        "extraction-methods-llm-nlp-or-hybrid")
    assert slug("PPR as a channel of KET-RAG and HugRAG, and better seeds") == (
        "ppr-as-a-channel-of-ket-rag-and-hugrag-and-better-seeds")
    assert slug("The `ppr` strategy") == "the-ppr-strategy"
    assert slug("**Adding** a _method_ to `__init__.py`") == "adding-a-method-to-__init__py"
    assert slug("Sharing a machine (`python benchmarks/llm_contention.py`)") == (
        "sharing-a-machine-python-benchmarksllm_contentionpy")
