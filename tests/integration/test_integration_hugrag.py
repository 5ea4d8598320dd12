"""HugRAG end to end with the real bundled models on the smallest HolisQA slice
(one question, one article): SmolLM2 extracts, summarises and checks gates, Gemma
filters the evidence and answers. Asserts what must hold whatever the small models
say: every structured output parses or its fallback is recorded, two LLM calls per
query, and a warm rerun makes no model call."""

from __future__ import annotations

import shutil

import pytest

from kgrag import api
from tests.conftest import SHARED_DATA, write_spec


@pytest.mark.integration
def test_hugrag_with_the_real_models(project):
    shutil.copytree(SHARED_DATA / "holisqa" / "business", project / "business")
    spec = write_spec(
        project, "hug",
        corpus={"dataset": "holisqa", "path": "../business", "limit": 1},
        chunking={"title": False},
        extraction={"model": "smollm2-135m", "prompt": "chat", "max_entities": 3,
                    "max_relationships": 2},
        graphs=[{"name": "h", "kind": "hierarchy"}],
        query=[{"name": "hug", "strategy": "hugrag", "hierarchy": "h", "budget_tokens": 400}],
        answer={"length": "long", "max_tokens": 48},
        evaluate={"metrics": ["f1", "context_recall"]})
    first = api.run(spec, echo=lambda s: None)
    steps = {s["name"]: s for s in first.manifest.steps}
    assert steps["extract.h"]["notes"]["core_chunks"] == steps["chunks"]["notes"]["chunks"]
    summaries = steps["summaries.h"]["notes"]
    assert summaries["modules"] == steps["hierarchy.h"]["notes"]["modules"]
    assert steps["gates.h"]["notes"]["checks"] <= steps["gates.h"]["notes"]["all_pairs"]
    (row,) = first.metrics["rows"]
    assert row["n_retrieved"] == 1 and row["llm_calls_per_query"] >= 2
    assert row["context_tokens_mean"] <= 400 and row["f1"] is not None

    again = api.run(spec, echo=lambda s: None)
    assert sum(s["llm"]["calls"] for s in again.manifest.steps) == 0
    assert again.metrics["rows"] == first.metrics["rows"]
