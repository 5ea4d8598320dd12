"""RAS's few-shot planner and sub-query writer on the real SmolLM2 through llama.cpp: the
plan grammar lets through only the three plan forms, whatever the model prefers to say."""

from __future__ import annotations

import pytest

from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM
from kgrag.models.registry import resolve_llm
from kgrag.retrieval.ras.plan import few_shot_plan
from kgrag.training.ras_text import NO_RETRIEVAL, SUBQ, SUFFICIENT, history
from kgrag.training.subq import Document, subquery

pytestmark = pytest.mark.integration

QUESTION = "Which Canadian rock band had a drummer inducted into the Modern Drummer Hall of Fame?"


def test_plans_and_subqueries_of_the_real_model_take_the_allowed_forms(tmp_path):
    model = resolve_llm("smollm2-135m")
    llm = CachedLLM(LLMSettings(name=model.name, path=model.path, sha256=model.sha256,
                                n_ctx=4096), CallCache(tmp_path / "calls"))
    for steps in ([], [(QUESTION, "(S> Neil Peart| P> drummer of| O> Rush)")]):
        plan = few_shot_plan(llm, history(steps, QUESTION), "completion")
        assert plan.valid and plan.kind in (NO_RETRIEVAL, SUBQ, SUFFICIENT)
        assert plan.kind != SUBQ or plan.query.endswith("?")
    written = subquery(llm, QUESTION, Document("Neil Peart", "Neil Peart was the drummer of "
                                               "Rush. He was inducted in 1983."), [], "completion")
    assert written == "" or (written.endswith("?") and "[" not in written)
