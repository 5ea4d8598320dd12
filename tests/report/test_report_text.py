"""The report shows the text: every retrieved unit with its file, page and heading and
its text, the units an answer cites marked with the answer's span in them; and a run
whose corpus has no questions gets a report of its documents, chunks, skipped files and
graph builds, of a bounded size."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.contents.answers import read_answers, read_citations
from kgrag.contents.chunks import read_chunks
from kgrag.contents.retrieved import read_retrieved
from kgrag.corpus.sources import chunk_sources
from kgrag.report import corpus
from kgrag.report.figures import build_costs
from kgrag.report.page import REPORT, write_report
from kgrag.report.run_folder import RunFolder
from kgrag.report.units import highlight
from tests.report.conftest import documents_spec
from tests.standin import RuleLLM, open_with


def test_the_answer_is_marked_whatever_its_case_and_line_breaks() -> None:
    text = "The Rhone\n  flows <fast> through Lyon."
    assert highlight(text, " rhone FLOWS ") == \
        "The <mark>Rhone\n  flows</mark> &lt;fast&gt; through Lyon."
    assert highlight(text, "<FAST> through") == \
        "The Rhone\n  flows <mark>&lt;fast&gt; through</mark> Lyon."
    assert highlight("Die Straße", "STRASSE") == "Die <mark>Straße</mark>"
    for absent in ("Paris", "", "   "):  # a free answer not in the unit: the text as it is
        assert highlight(text, absent) == escape(text)


def questions_of(page: str) -> dict[str, str]:
    """Question id → the HTML of its drill-down."""
    return {re.search(r"<code>(.*?)</code>", part).group(1): part.split("</details>\n")[0]
            for part in page.split('<details class="question"><summary>')[1:]}


def test_each_retrieved_unit_shows_its_file_page_heading_and_text(cited_run: Path) -> None:
    run = RunFolder.open(cited_run)
    drill = questions_of(write_report(cited_run).read_text())
    chunks = read_chunks(run.artefact("chunks"))
    where, text = chunk_sources(chunks), dict(zip(chunks["chunk_id"], chunks["context"]))
    # rivers.md's chunk opens under "Rivers of France" but lies under "Rhone"
    assert {"guide.pdf, p. 2", "rivers.md, § Rhone"} <= set(where.values())
    for row in read_retrieved(run.artefact("retrieve.dense")).iter_rows(named=True):
        html = drill[row["question_id"]]
        for unit in row["unit_ids"]:
            item = html.split(f"<code>{unit}</code>")[1].split("</li>")[0]
            assert f'<span class="where">{escape(where[unit])}</span>' in item
            assert escape(text[unit]) in re.sub(r"</?mark>", "", item)


def test_a_cited_unit_is_marked_and_open_with_the_answer_in_it(cited_run: Path) -> None:
    run = RunFolder.open(cited_run)
    drill = questions_of(write_report(cited_run).read_text())
    answers = read_answers(run.artefact("answer.dense"))
    citations = read_citations(run.artefact("answer.dense"))
    for question, answer, cited in zip(answers["question_id"], answers["answer"],
                                       citations["cited_units"]):
        html = drill[question]
        [unit] = cited
        item = html.split(f"<code>{unit}</code>")[0].rsplit("<li", 1)[1]
        assert item.startswith(' id="q') and 'class="gold cited"><details class="unit" open>' \
            in item
        [marked] = re.findall(r"<mark>(.*?)</mark>", html, flags=re.DOTALL)
        assert " ".join(marked.split()).lower() == answer.lower()
    # the Markdown answer was copied across the blank line under a heading
    assert "of France ## Rhone" in answers["answer"].to_list()


def test_build_cost_panels_show_only_what_some_build_paid() -> None:
    """Was: six panels, the LLM ones empty −1…1 axes for an LLM-free build."""
    free = {"graph": "kw", "kind": "bipartite", "llm_calls": 0, "cache_hits": 0,
            "tokens_in": 0, "tokens_out": 0, "embeddings": 13, "wall_s": 4.2}
    figure = build_costs([free])
    assert [title.text for title in figure.layout.annotations] == ["wall seconds", "embeddings"]
    assert [list(bar.y) for bar in figure.data] == [[4.2], [13]]
    assert build_costs([{**free, "embeddings": 0, "wall_s": None}]) is None
    paid = build_costs([free, {**free, "graph": "skel", "llm_calls": 7, "tokens_in": 900}])
    assert len(paid.data) == 4 and paid.layout.height == 2 * 420  # two rows of panels


def test_a_run_without_questions_gets_a_report_of_its_corpus_and_builds(
        browse_run: tuple[Path, str], tmp_path: Path) -> None:
    """Was: ``kgrag run`` wrote no report, and ``kgrag report`` refused the run."""
    folder, printed = browse_run
    assert printed.splitlines()[-1] == f"report: {folder / REPORT}"
    page = (folder / REPORT).read_text()
    assert main(["report", str(folder), "-o", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_text() == page
    assert re.findall(r'<section id="(\w+)">', page) == ["corpus", "builds"]
    assert "no questions to evaluate" in page
    chunks = read_chunks(RunFolder.open(folder).artefact("chunks"))
    assert page.count('<details class="unit">') == chunks.height == 3
    for context in chunks["context"]:
        assert escape(context) in page
    assert "<td>Museum guide</td><td>guide.pdf</td>" in page
    assert ("<tr><td>broken.docx</td><td>corrupt</td><td>not a readable DOCX file (File is "
            "not a zip file)</td></tr>") in page
    assert "3 files: 2 gave text, 1 skipped." in page
    builds = page.split('<section id="builds">')[1]
    assert "<td>kw</td><td>bipartite</td>" in builds and 'id="fig-degrees"' in builds


def test_a_big_corpus_lists_its_first_rows_and_says_how_many_are_left_out(
        browse_run: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = browse_run
    monkeypatch.setattr(corpus, "SHOWN", 1)
    page = write_report(folder).read_text()
    assert page.count('<details class="unit">') == 1
    assert "the first 1 listed; 2 more chunks left out" in page
    assert "the first 1 listed; 1 more documents left out" in page


def test_a_report_without_figures_holds_no_plotly(project: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder with no graph build: its report is the corpus alone, kilobytes, without
    plotly's 4.8 MB of script."""
    spec = documents_spec(project)
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    assert main(["run", str(spec)]) == 0
    page = (project / "outputs" / "docs" / REPORT).read_text()
    assert "<script" not in page and len(page.encode()) < 20_000
    assert page.count('<details class="unit">') == 3 and "<td>Rivers of France</td>" in page
    builds = page.split('<section id="builds">')[1]
    assert "no graph build in this spec" in builds
