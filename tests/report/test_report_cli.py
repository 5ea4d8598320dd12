"""``kgrag report RUN`` (a spec, or its run folder) and the report at the end of ``kgrag
run``; a folder that holds no finished, evaluated run is one error line and exit code 2."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.pipeline.manifest import MANIFEST
from kgrag.report.page import REPORT
from tests.conftest import write_spec
from tests.disks import Disk, kgrag_on, needs_mounts
from tests.standin import RuleLLM, open_with


def test_kgrag_report_writes_the_page_where_asked(finished_run: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "elsewhere.html"
    assert main(["report", str(finished_run), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"report: {out} (") and "MiB, self-contained" in said
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "kgrag report: report" in page
    assert not (finished_run / REPORT).exists() or (finished_run / REPORT).read_text() == page


def run_spec(project: Path, monkeypatch: pytest.MonkeyPatch, **answer) -> Path:
    spec = write_spec(project, "small", corpus={"dataset": "musique", "path": "../corpus.jsonl",
                                                "limit": 1},
                      query=[{"name": "dense", "strategy": "naive", "budget_tokens": 300}],
                      answer=answer, evaluate={"metrics": ["f1", "coverage"]})
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    return spec


def test_kgrag_run_ends_with_the_report(project: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture) -> None:
    spec = run_spec(project, monkeypatch, questions=1)
    assert main(["run", str(spec)]) == 0
    report = project / "outputs" / "small" / REPORT
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {report}"
    page = report.read_text()
    assert "<tr><td>dense</td><td>An answer from the evidence</td>" in page
    report.unlink()
    assert main(["report", str(spec)]) == 0  # the spec, as run and query take it
    assert capsys.readouterr().out.startswith(f"report: {report} (")
    assert report.read_text().count("An answer from the evidence") == page.count(
        "An answer from the evidence")


def errors_of(argv: list[str], capsys: pytest.CaptureFixture) -> list[str]:
    assert main(argv) == 2
    return capsys.readouterr().err.splitlines()


def test_a_folder_that_is_no_run_is_one_error(tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    [line] = errors_of(["report", str(tmp_path / "nowhere")], capsys)
    assert line == f"kgrag: error: no run folder {tmp_path / 'nowhere'}: give a run's spec " \
                   "or its outputs folder (outputs/<spec name>)"
    (tmp_path / "notes.txt").write_text("not a run")
    [line] = errors_of(["report", str(tmp_path)], capsys)
    assert line == f"kgrag: error: {tmp_path} is not a run folder: it has no {MANIFEST} (a run " \
                   "writes outputs/<spec name>/)"
    (tmp_path / MANIFEST).write_text("{")
    [line] = errors_of(["report", str(tmp_path)], capsys)
    assert line.startswith(f"kgrag: error: {tmp_path / MANIFEST} is not a manifest: ")


def test_a_run_that_did_not_finish_or_evaluate_is_one_error(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    spec = run_spec(project, monkeypatch, questions=0)
    folder = project / "outputs" / "small"
    # a query that builds the index records only the steps it ran: nothing evaluated
    assert main(["query", str(spec), "Where is Van Hook Township?"]) == 0
    capsys.readouterr()
    [line] = errors_of(["report", str(folder)], capsys)
    assert line.startswith(f"kgrag: error: the last run in {folder} evaluated nothing, though "
                           "its corpus has questions: it was a `kgrag query`'s")
    assert main(["run", str(spec)]) == 0
    manifest = json.loads((folder / MANIFEST).read_text())
    # a query that builds nothing leaves the run's manifest, and its report, as they were
    assert main(["query", str(spec), "Where is Van Hook Township?"]) == 0
    assert json.loads((folder / MANIFEST).read_text()) == manifest
    assert main(["report", str(spec)]) == 0
    capsys.readouterr()
    (folder / MANIFEST).write_text(json.dumps({**manifest, "status": "running"}))
    [line] = errors_of(["report", str(folder)], capsys)
    assert line == (f"kgrag: error: the run in {folder} has not finished (it is running, or "
                    "was stopped): finish it with `kgrag run SPEC` and report again")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    evaluate = next(step["artefact"] for step in manifest["steps"] if step["name"] == "evaluate")
    (folder / evaluate).rename(folder / "moved")
    [line] = errors_of(["report", str(folder)], capsys)
    assert line == (f"kgrag: error: {folder}: the artefact of step evaluate is gone "
                    f"({evaluate}); `kgrag run SPEC` rebuilds it")


def test_a_report_on_a_full_disk_is_one_error_and_leaves_no_temp_file(
        finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """Was: ``OSError: [Errno 28] No space left on device``, a traceback, and a half
    written ``.tmp-report.html`` left behind. The disk fills as the page is written."""
    real_write = Path.write_text

    def fills_up(self: Path, text: str, *args: object, **kwargs: object) -> int:
        real_write(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", fills_up)
    out = tmp_path / "pages" / "page.html"
    out.parent.mkdir()
    [line] = errors_of(["report", str(finished_run), "-o", str(out)], capsys)
    assert line == (f"kgrag: error: cannot write the report page.html in {out.parent}: no space "
                    "left on its disk; free space there or make it writable (or write the "
                    "report elsewhere with kgrag report --output), then write it again")
    assert list(out.parent.iterdir()) == []


@needs_mounts
def test_a_report_on_a_real_full_disk_is_one_error_and_leaves_no_temp_file(
        finished_run: Path, tmp_path: Path) -> None:
    pages = tmp_path / "pages"
    done = kgrag_on([Disk(pages, 1024)], "report", str(finished_run), "-o",
                    str(pages / "page.html"), then=f"ls -A {pages}")
    # the page, plotly's script inline, is larger than the disk
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"kgrag: error: cannot write the report page.html in {pages}: "
                                  "no space left on its disk;")
    assert done.stdout == ""  # what ``ls`` found on that disk afterwards: nothing
