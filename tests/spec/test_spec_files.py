"""The specs and the schema file shipped in the repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag.spec import check_spec
from kgrag.spec.schema import SCHEMA

REPO = Path(__file__).resolve().parents[2]
REPO_SPECS = sorted((REPO / "specs").glob("*.yaml"))


@pytest.mark.skipif(not REPO_SPECS, reason="no specs/*.yaml in the repository yet")
@pytest.mark.parametrize("path", REPO_SPECS, ids=lambda path: path.name)
def test_repository_spec_validates(path: Path) -> None:
    assert check_spec(path) == []


def test_the_published_schema_is_the_one_validation_uses() -> None:
    """Editors and CI read schemas/pipeline.schema.json; kgrag validates with the
    packaged copy. A checkout without symlinks would let the two drift apart."""
    published = REPO / "schemas" / "pipeline.schema.json"
    assert json.loads(published.read_text(encoding="utf-8")) == SCHEMA
