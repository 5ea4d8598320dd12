"""The specs shipped in the repository must always validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgrag.spec import check_spec

REPO_SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").glob("*.yaml"))


@pytest.mark.skipif(not REPO_SPECS, reason="no specs/*.yaml in the repository yet")
@pytest.mark.parametrize("path", REPO_SPECS, ids=lambda path: path.name)
def test_repository_spec_validates(path: Path) -> None:
    assert check_spec(path) == []
