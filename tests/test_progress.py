"""Progress outside a terminal: plain lines at an interval (count, rate, ETA), named by step."""

from __future__ import annotations

import io

import numpy as np
import pytest

from kgrag import progress as progress_module
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
from kgrag.progress import Progress, duration, progress, step_label
from kgrag.steps.step import Step, StepContext


class LogStream(io.StringIO):
    """What stderr is under nohup, in CI or piped to a file: not a terminal."""

    def isatty(self) -> bool:
        return False


def test_a_log_gets_a_line_per_interval_with_count_rate_and_eta(monkeypatch):
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    log = LogStream()
    report = Progress("extract", total=4, unit="chunk", stream=log)
    for _ in report.wrap(range(4)):
        pass
    lines = log.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("  extract 1/4 (25%), ") and "chunk/" in lines[0]
    assert "ETA" in lines[0] and lines[0].endswith("elapsed")
    assert lines[-1].startswith("  extract 4/4 (100%)")


def test_short_loops_print_nothing(monkeypatch):
    log = LogStream()
    list(Progress("answer", total=3, stream=log).wrap(range(3)))
    assert log.getvalue() == ""


def test_an_unknown_total_has_counts_but_no_eta(monkeypatch):
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    log = LogStream()
    report = Progress("gate checks", stream=log)
    report.tick()
    report.tick()
    assert log.getvalue().splitlines()[-1].startswith("  gate checks 2, ")
    assert "ETA" not in log.getvalue()


def test_lines_name_the_step_that_runs(monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    with step_label("extract.skel"):
        list(progress(range(2), desc="extract"))
    assert "[extract.skel] extract 2/2" in capsys.readouterr().err


def test_a_step_reports_progress_when_stderr_is_not_a_terminal(monkeypatch, capsys, tmp_path):
    """Was: tqdm with disable=None drew nothing at all outside a terminal."""
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    step = Step("answer.dense", "answer", {}, {}, "0" * 64)
    ctx = StepContext(step, None, None, tmp_path, {})
    for _ in ctx.progress(range(3), total=3, desc="answer", unit="question"):
        pass
    err = capsys.readouterr().err
    assert "answer 3/3 (100%)" in err and "question/" in err


class ZeroBackend:
    def encode(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)


def test_long_encodes_report_per_batch(monkeypatch, capsys, cache):
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    settings = EmbedderSettings(name="zero", path=cache.directory, sha256="z")
    embedder = CachedEmbedder(settings, cache, backend=ZeroBackend())
    assert embedder.encode([f"text {i}" for i in range(2500)]).shape == (2500, 4)
    lines = capsys.readouterr().err.splitlines()
    batch = settings.batch_size  # texts are claimed, encoded and saved a batch at a time
    counts = [int(line.split()[1].split("/")[0]) for line in lines]
    assert counts == [*range(batch, 2500, batch), 2500]
    assert lines[-1].startswith("  embed 2500/2500 (100%)")


@pytest.mark.parametrize(("seconds", "text"), [(42, "42s"), (185, "3m 05s"), (3720, "1h 02m")])
def test_durations_read_naturally(seconds, text):
    assert duration(seconds) == text
