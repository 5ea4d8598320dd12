"""The report in a real headless browser (Debian's chromium): it opens with no console
error, draws every figure, fetches nothing, and the check fails on a page that errs; a
cited answer is seen marked in the text of the unit it cites; a PPR walk's subgraph is
drawn, hovered and clicked through to a unit; the report of a run without questions
opens too."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from kgrag.contents.answers import read_answers, read_citations
from kgrag.contents.chunks import read_chunks
from kgrag.contents.retrieved import read_retrieved
from kgrag.corpus.sources import chunk_sources
from kgrag.report.page import REPORT, write_report
from kgrag.report.run_folder import RunFolder
from tests.report.chromium import WIDTH, chromium, visit

FIGURE = 'class="plotly-graph-div"'  # one per figure in the page's HTML


@pytest.fixture(autouse=True)
def needs_chromium() -> None:
    """CI installs chromium (.ci/run), so there it must be found; elsewhere the tests
    say how to get it."""
    if chromium() is None:
        message = "no chromium on PATH: apt-get install chromium (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def test_the_report_opens_with_no_console_error_and_draws_every_figure(
        report_page: Path, tmp_path: Path) -> None:
    screenshot = tmp_path / "report.png"
    seen = visit(report_page, screenshot)
    print(f"\nscreenshot of the report: {screenshot}")
    assert seen.errors == []
    assert seen.fetched == []  # everything is inlined: nothing is read at view time
    figures = report_page.read_text().count(FIGURE)
    assert figures == 7  # metrics, a sweep each of budget, β and θ, cost, sizes, degrees
    assert seen.plots == figures
    assert png_size(screenshot) == (WIDTH, 2400)


def test_the_check_fails_on_a_page_that_errs_or_fetches(report_page: Path,
                                                       tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    shutil.copy(report_page, broken)
    page = broken.read_text()
    broken.write_text(page.replace("</body>", '<script>window.reportIsBroken()</script>'
                                   '<img src="elsewhere.png"></body>'))
    seen = visit(broken, tmp_path / "broken.png")
    assert any("reportIsBroken is not a function" in error for error in seen.errors)
    assert seen.fetched == [(tmp_path / "elsewhere.png").as_uri()]
    assert seen.plots == page.count(FIGURE)  # the figures before the fault still drew


READ_A_QUESTION = """(() => {
  const seen = element => !!element && element.checkVisibility()
    && element.getClientRects().length > 0;
  const question = document.querySelector('details.question');
  const cited = question.querySelector('li.cited');
  const closed = seen(cited.querySelector('mark'));
  question.querySelector('summary').click();  // a person opens the question
  const mark = cited.querySelector('mark'), where = cited.querySelector('.where');
  const other = question.querySelector('li:not(.cited) details.unit');
  const before = seen(other.querySelector('div.text'));
  other.querySelector('summary').click();  // and another unit's text
  mark.scrollIntoView({block: 'center'});
  return {closed, mark: mark.textContent, markSeen: seen(mark),
          markBackground: getComputedStyle(mark).backgroundColor,
          where: where.textContent, whereSeen: seen(where),
          citedText: cited.querySelector('div.text').innerText,
          otherBefore: before, otherAfter: seen(other.querySelector('div.text')),
          otherText: other.querySelector('div.text').innerText,
          otherUnit: other.querySelector('code').textContent};
})()"""


def words(text: str) -> str:
    return " ".join(text.split())


def test_a_cited_answer_reads_in_the_browser(cited_run: Path, tmp_path: Path) -> None:
    """Open the first question: the unit its answer cites shows its file and page and its
    text, the answer marked in it; another unit's text opens on a click."""
    run = RunFolder.open(cited_run)
    page = write_report(cited_run)
    screenshot = tmp_path / "cited.png"
    seen = visit(page, screenshot, 1200, READ_A_QUESTION)
    print(f"\nscreenshot of a cited answer: {screenshot}")
    assert seen.errors == [] and seen.fetched == []
    found = seen.probed
    answers = read_answers(run.artefact("answer.dense"))
    [unit] = read_citations(run.artefact("answer.dense"))["cited_units"][0]
    chunks = read_chunks(run.artefact("chunks"))
    text = dict(zip(chunks["chunk_id"], chunks["context"]))
    assert not found["closed"]  # hidden until the question is opened
    assert found["markSeen"] and words(found["mark"]) == answers["answer"][0]
    assert found["markBackground"] not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    assert found["whereSeen"] and found["where"] == chunk_sources(chunks)[unit] == \
        "guide.pdf, pp. 1-2"
    assert words(found["citedText"]) == words(text[unit])
    assert not found["otherBefore"] and found["otherAfter"]
    assert words(found["otherText"]) == words(text[found["otherUnit"]])


def test_the_report_of_a_run_without_questions_opens_in_the_browser(
        browse_run: tuple[Path, str], tmp_path: Path) -> None:
    folder, _ = browse_run
    page = folder / REPORT
    screenshot = tmp_path / "browse.png"
    seen = visit(page, screenshot, 1400, """(() => {
      const chunk = document.querySelector('ol.chunks details.unit');
      chunk.querySelector('summary').click();
      const text = chunk.querySelector('div.text');
      return {text: text.innerText, seen: text.checkVisibility()};
    })()""")
    print(f"\nscreenshot of a report without questions: {screenshot}")
    assert seen.errors == [] and seen.fetched == []
    assert seen.plots == page.read_text().count(FIGURE) == 3  # cost, sizes, degrees
    chunks = read_chunks(RunFolder.open(folder).artefact("chunks"))
    assert seen.probed["seen"] and words(seen.probed["text"]) == words(chunks["context"][0])


FOLLOW_A_WALK = """(() => {
  const figure = document.querySelector('tr.walk svg.walk');
  const question = figure.closest('details.question');
  const hidden = !figure.checkVisibility();  // inside a closed question
  question.querySelector('summary').click();  // a person opens the question
  const box = figure.getBoundingClientRect();
  const seeds = [...figure.querySelectorAll('g.seed > title')].map(t => t.textContent);
  const chunks = [...figure.querySelectorAll('a.chunk')];
  const link = chunks[chunks.length - 1];
  link.scrollIntoView({block: 'center'});
  link.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, view: window}));
  const target = document.getElementById(link.getAttribute('href').slice(1));
  const landed = target.getBoundingClientRect();
  return {hidden, shown: figure.checkVisibility(), width: box.width, height: box.height, seeds,
          hrefs: chunks.map(a => a.getAttribute('href')),
          hover: link.querySelector('title').textContent,
          hash: location.hash, landedTop: landed.top, inView: landed.top >= 0
            && landed.top < window.innerHeight,
          unit: target.querySelector('code').textContent,
          question: question.querySelector('summary code').textContent};
})()"""


def test_a_walk_s_subgraph_is_drawn_and_its_chunks_lead_to_their_units(
        finished_run: Path, report_page: Path, tmp_path: Path) -> None:
    """Open the first question a PPR walk drew: its figure shows the seeds, hovering a
    chunk names it, and a click on it scrolls the page to that unit in the list."""
    screenshot = tmp_path / "walk.png"
    seen = visit(report_page, screenshot, 1200, FOLLOW_A_WALK)
    print(f"\nscreenshot of a walk's subgraph: {screenshot}")
    assert seen.errors == [] and seen.fetched == []
    found = seen.probed
    assert found["hidden"] and found["shown"] and found["width"] > 300 and found["height"] > 200
    rows = {row["question_id"]: row for row in read_retrieved(
        RunFolder.open(finished_run).artefact("retrieve.ppr")).iter_rows(named=True)}
    row = rows[found["question"]]
    trace = json.loads(row["trace"])
    assert sorted(seed.split(" (weight")[0] for seed in found["seeds"]) == sorted(
        f"seed {name}" for name in trace["seeds"])
    ranks = range(1, len(row["unit_ids"]) + 1)
    assert [href.rsplit("-", 1)[1] for href in found["hrefs"]] == [str(r) for r in ranks]
    last = row["unit_ids"][-1]
    assert found["hover"].startswith(f"[{len(row['unit_ids'])}] {last}")
    assert found["hash"] == found["hrefs"][-1] and found["inView"]
    assert found["unit"] == last  # the click landed on the unit the node stands for
