"""The report in a real headless browser (Debian's chromium): it opens with no console
error, draws every figure, fetches nothing, and the check fails on a page that errs."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

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
