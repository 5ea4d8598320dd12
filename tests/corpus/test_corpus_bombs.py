"""Hostile, oversized and vanishing files in a documents folder: each is skipped and counted
by kind, and the rest of the folder is imported (issue #42, items 10 to 13)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from kgrag.corpus import bounds
from kgrag.corpus.convert import Unreadable, convert
from kgrag.corpus.importers import files
from kgrag.pipeline.runner import run_plan
from kgrag.spec import check_spec
from tests.conftest import REPO, write_spec
from tests.corpus.bombs import (
    docx_damaged_deflate,
    docx_entity_bomb,
    docx_malformed,
    docx_with,
    html_attributes,
    html_elements,
    html_nested,
    html_paragraphs,
    small_docx_xml,
)
from tests.corpus.test_corpus_documents import by_file, load, pdf_bytes
from tests.standin import RuleLLM, open_with


def verdict(data: bytes, suffix: str) -> Unreadable:
    with pytest.raises(Unreadable) as caught:
        convert(data, suffix)
    return caught.value


@pytest.mark.parametrize("bomb", [
    pytest.param(lambda: docx_with(padding_mb=200), id="200MB-entry"),
    pytest.param(lambda: docx_with(padding_mb=8), id="ratio-1000"),
    pytest.param(lambda: docx_with(method=zipfile.ZIP_BZIP2), id="bzip2-entry"),
    pytest.param(docx_entity_bomb, id="entity-bomb"),
    pytest.param(docx_malformed, id="malformed-xml"),
    pytest.param(docx_damaged_deflate, id="damaged-deflate"),  # found by document_fuzz
])
def test_a_docx_bomb_or_broken_xml_is_corrupt(bomb):
    assert verdict(bomb(), ".docx").kind == "corrupt"


def test_a_pdf_whose_stream_filter_is_damaged_is_corrupt():
    """A byte flipped in a stream's filter name (``/FlateDecode``): pypdf raises
    NotImplementedError for the filter it does not know (found by document_fuzz)."""
    data = pdf_bytes(["The Rhone flows through Lyon."]).replace(b"/FlateDecode", b"/FlateDecodX")
    assert verdict(data, ".pdf").kind == "corrupt"


def test_a_docx_bomb_is_judged_by_its_declared_sizes_before_inflating():
    bomb = docx_with(padding_mb=200)
    entry = zipfile.ZipFile(io.BytesIO(bomb)).getinfo("word/document.xml")
    assert entry.file_size > 200 * 2**20 and len(bomb) < 2**20  # what the zip declares
    assert "inflate to" in verdict(bomb, ".docx").detail


def test_a_docx_with_megabytes_of_real_text_still_reads():
    """Text deflates a few times over, far below the ratio of a bomb."""
    paragraphs = [" ".join(f"w{(p * 7919 + i * 104729) % 100_003}" for i in range(2_000))
                  for p in range(200)]
    xml = small_docx_xml().replace(b"<w:t>The Rhone flows through Lyon.</w:t>", "".join(
        f"<w:t>{p}</w:t>" for p in paragraphs).encode())
    data = docx_with(xml)
    assert zipfile.ZipFile(io.BytesIO(data)).getinfo("word/document.xml").file_size > 2**21
    assert convert(data, ".docx").blocks[0].text == "".join(paragraphs)


def test_deeply_nested_html_is_too_complex_and_refused_at_once():
    started = time.perf_counter()
    assert verdict(html_nested(30_000), ".html").kind == "too_complex"  # lexbor: ~7 s
    assert time.perf_counter() - started < 2


def test_an_element_with_a_hundred_thousand_attributes_is_too_complex():
    assert verdict(html_attributes(100_000), ".html").kind == "too_complex"


def test_more_elements_or_comments_than_the_bound_is_too_complex(monkeypatch):
    monkeypatch.setattr(bounds, "HTML_MAX_ELEMENTS", 1_000)
    assert verdict(html_elements(1_001), ".html").kind == "too_complex"
    comments = f"<p>x</p>{'<!---->' * 1_001}".encode()  # a node each in the tree too
    assert verdict(comments, ".html").kind == "too_complex"
    assert [b.text for b in convert(html_elements(990), ".html").blocks] == ["x"]


def test_a_deep_nest_of_inline_elements_converts_in_linear_time():
    """Ten thousand nested spans under one paragraph: one block, found without walking
    up the nest once per text (38 s before)."""
    started = time.perf_counter()
    [block] = convert(html_nested(10_000, "span"), ".html").blocks
    assert block.text == "x" * 10_000
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("page", [
    "<svg><g><path d='M 1 2 L 3 4'/><circle r='1'/></g></svg><p>text</p>",
    "<div><ul><li>unclosed item</div>",
    "<table><tr><td>a<td>b</table><p>text",
])
def test_ordinary_pages_stay_far_below_the_bound(page):
    """Self-closing SVG elements, end tags that close several elements, implied end tags:
    many thousand times over, each stays a shallow page."""
    data = f"<html><body>{page * 20_000}</body></html>".encode()
    assert convert(data, ".html").blocks


def test_a_file_over_max_file_mb_is_skipped_unread_and_counted(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "big.html").write_bytes(html_paragraphs(1.2))
    (folder / "small.html").write_bytes(html_paragraphs(0.1))
    corpus = load(folder, max_file_mb=1)
    statuses = dict(zip(corpus.sources["file"], corpus.sources["status"]))
    assert statuses == {"big.html": "too_large", "small.html": "converted"}
    assert set(by_file(corpus)) == {"small.html"}
    assert set(by_file(load(folder))) == {"big.html", "small.html"}  # default: 20 MB


def test_max_file_mb_has_a_maximum_and_applies_to_a_documents_folder_only(tmp_path):
    spec = tmp_path / "spec.yaml"
    for corpus, complaint in [("{dataset: documents, path: d, max_file_mb: 4096}", "4096"),
                              ("{dataset: text, path: d, max_file_mb: 5}", "documents"),
                              ("{dataset: documents, path: d, max_file_mb: 0.5}", None)]:
        spec.write_text(f"name: s\ncorpus: {corpus}\n")
        found = [str(problem) for problem in check_spec(spec)]
        assert (complaint in " ".join(found)) if complaint else found == [], found


def test_the_same_bytes_under_another_suffix_get_their_own_verdict(tmp_path):
    """Keyed by bytes alone, an empty .docx seen first made every empty file corrupt."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.docx", "b.pdf", "c.txt", "d.html"):
        (folder / name).write_bytes(b"")
    (folder / "notes.md").write_text("# Lyon\n\nLyon lies on the Rhone.\n")
    (folder / "notes.txt").write_text("# Lyon\n\nLyon lies on the Rhone.\n")
    cache = tmp_path / "converted"
    for run in ("cold", "warm"):
        corpus = load(folder, cache)
        sources = {f: (s, d) for f, s, d in corpus.sources.select("file", "status", "detail")
                   .iter_rows()}
        assert sources["a.docx"][0] == "corrupt" and "DOCX" in sources["a.docx"][1], run
        assert sources["b.pdf"][0] == "corrupt" and "PDF" in sources["b.pdf"][1], run
        assert sources["c.txt"][0] == sources["d.html"][0] == "empty", run
        headings = dict(zip(corpus.sections["file"], corpus.sections["heading"]))
        assert headings == {"notes.md": "Lyon", "notes.txt": None}, run


def test_a_file_renamed_during_the_import_is_counted_as_vanished(tmp_path, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.md", "m.md", "zz.md"):
        (folder / name).write_text(f"# {name}\n\nA note called {name}.\n")
    real_convert = files.convert

    def convert_and_rename(data: bytes, suffix: str):
        """Another program renames zz.md while a.md is being converted."""
        if (folder / "zz.md").exists():
            (folder / "zz.md").rename(folder / "zz-renamed.md")
        return real_convert(data, suffix)

    monkeypatch.setattr(files, "convert", convert_and_rename)
    corpus = load(folder)
    statuses = dict(zip(corpus.sources["file"], corpus.sources["status"]))
    assert statuses == {"a.md": "converted", "m.md": "converted", "zz.md": "vanished"}
    assert set(by_file(corpus)) == {"a.md", "m.md"}


def test_each_kind_skipped_is_a_count_in_the_import_notes(project: Path):
    """Through a run: the import step's notes count each kind of file skipped."""
    folder = project / "docs"
    folder.mkdir()
    (folder / "fine.md").write_text("# Lyon\n\nLyon lies on the Rhone.\n")
    (folder / "bomb.docx").write_bytes(docx_with(padding_mb=8))
    (folder / "laughs.docx").write_bytes(docx_entity_bomb())
    (folder / "nest.html").write_bytes(html_nested(30_000))
    (folder / "big.html").write_bytes(html_paragraphs(0.6))
    spec = write_spec(project, corpus={"dataset": "documents", "path": "../docs",
                                       "max_file_mb": 0.5})
    session = open_with(spec, RuleLLM())
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, echo=lambda line: None)
    notes = {step["name"]: step["notes"] for step in manifest.steps}["corpus"]
    assert {k: notes.get(k) for k in ("files", "converted", "skipped", "skipped_corrupt",
                                      "skipped_too_complex", "skipped_too_large")} == {
        "files": 5, "converted": 1, "skipped": 4, "skipped_corrupt": 2,
        "skipped_too_complex": 1, "skipped_too_large": 1}


def test_the_document_fuzz_ends_every_mutant_converted_or_skipped(tmp_path):
    """``benchmarks/spec_fuzz.py --kind documents`` on 80 mutants (the benchmark runs
    1,000): damaged real documents and bombs, each beside an ordinary file."""
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "spec_fuzz.py"),
                           "--kind", "documents", "--mutants", "80", "--seed", "2"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    counts = dict(re.findall(r"^  ([a-z_]+) +(\d+)$", done.stdout, flags=re.MULTILINE))
    assert "failed" not in counts and "hung" not in counts
    assert int(counts["converted"]) > 0 and int(counts["corrupt"]) > 0
