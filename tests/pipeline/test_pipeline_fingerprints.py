"""The plans of the specs in specs/ keep their step fingerprints.

A fingerprint that changes makes every later run rebuild that step and all after
it, which for an extraction means hours of LLM calls; so a change must be on
purpose. ``spec_fingerprints.json`` holds every step's fingerprint as recorded when each spec
landed; options added later keep them by being off (or absent) by default. After a deliberate change,
rewrite it with ``python -m tests.pipeline.test_pipeline_fingerprints`` and say why
in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag import api
from tests.conftest import REPO, SHARED_DATA

RECORDED = Path(__file__).with_name("spec_fingerprints.json")
SPECS = sorted((REPO / "specs").glob("*.yaml"))


def plan_fingerprints(path: Path) -> dict[str, str]:
    return {step.name: step.fingerprint for step in api.open_session(path).plan.steps}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the specs read ../shared/data")
@pytest.mark.parametrize("path", SPECS, ids=lambda path: path.name)
def test_a_landed_spec_keeps_its_fingerprints(path: Path) -> None:
    assert plan_fingerprints(path) == json.loads(RECORDED.read_text())[path.name]


def test_every_spec_has_recorded_fingerprints() -> None:
    assert sorted(json.loads(RECORDED.read_text())) == [path.name for path in SPECS]


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the specs read ../shared/data")
def test_a_graph_llm_named_by_path_is_the_folder_its_spec_plans() -> None:
    """A ras row may run another spec's trained planner by the path of its artefact
    folder, whose name carries that training's fingerprint: the path must follow it."""
    import yaml

    planned = set()
    for path in SPECS:
        session = api.open_session(path)
        planned |= {session.artefact(step.name).resolve() for step in session.plan.steps}
    named = [(path, entry["graph_llm"]) for path in SPECS
             for entry in yaml.safe_load(path.read_text()).get("query", [])
             if "/" in (entry.get("graph_llm") or "")]
    assert named  # specs/ras_scale_hotpotqa.yaml runs MuSiQue's planner
    for path, folder in named:
        assert (path.parent / folder).resolve() in planned, (path.name, folder)


if __name__ == "__main__":
    RECORDED.write_text(json.dumps({path.name: plan_fingerprints(path) for path in SPECS},
                                   indent=2, sort_keys=True) + "\n")
