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
from kgrag.errors import KgragError
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
def test_a_trained_model_named_by_path_is_in_the_folder_its_spec_plans() -> None:
    """A query entry may read a model another spec trains (an ARK ``embedder``, a ras
    ``graph_llm``) by the path of that spec's artefact folder, whose name carries the
    training's fingerprint: the path must follow it when the training changes."""
    import yaml

    every = sorted((REPO / "specs").rglob("*.yaml"))
    by_name = {yaml.safe_load(path.read_text())["name"]: path for path in every}
    named = [(path, value) for path in every
             for entry in yaml.safe_load(path.read_text()).get("query", [])
             for value in (entry.get("embedder"), entry.get("graph_llm"))
             if value and "outputs/" in value]
    checked = 0
    for path, value in named:
        parts = Path(value).parts
        spec, artefact = parts[parts.index("outputs") + 1:parts.index("outputs") + 3]
        try:
            session = api.open_session(by_name[spec])
        except KgragError as exc:  # specs/scale/ark_joint.yaml: a corpus a benchmark writes
            assert "corpus path does not exist" in str(exc), (path.name, value)
            continue
        checked += 1
        planned = {session.artefact(step.name).name for step in session.plan.steps}
        assert artefact in planned, (path.name, value)
        assert (path.parent / value).resolve().is_relative_to(
            (session.run_dir / artefact).resolve()), (path.name, value)
    assert checked  # specs/transfer/ark_gold_s1_e1_*.yaml and specs/ras_scale_hotpotqa.yaml

if __name__ == "__main__":
    RECORDED.write_text(json.dumps({path.name: plan_fingerprints(path) for path in SPECS},
                                   indent=2, sort_keys=True) + "\n")
