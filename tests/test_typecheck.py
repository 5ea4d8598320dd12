"""The type check's count of ``type: ignore`` comments, and its refusal of one that does
not say which error it silences and why (``tests/typecheck.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.typecheck import ignores


def test_every_ignore_is_counted_and_one_without_code_or_reason_is_named(tmp_path: Path
                                                                          ) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text(
        "x: int = ''  # type: ignore[assignment]  # a str on purpose\n"
        "y: int = ''  # type: ignore\n"
        "z: int = ''  # type: ignore[assignment]\n"
        "w = 1  # no ignore here\n")
    count, unexplained = ignores(package)
    assert count == 3
    assert unexplained == ["pkg/a.py:2", "pkg/a.py:3"]


def test_the_package_itself_explains_each_ignore() -> None:
    count, unexplained = ignores()
    assert unexplained == []
    assert count < 20  # issue 45's ceiling
