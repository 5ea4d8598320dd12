"""ARK's alignment scores on the real SmolLM2 through llama.cpp: a unit that states the
answer scores it higher, and a score does not depend on the call before it (the backward
call reuses the forward call's evaluation of the unit, cut to a block boundary)."""

from __future__ import annotations

import pytest

from kgrag.models.llm import LlamaCppBackend, LLMSettings
from kgrag.models.registry import resolve_llm
from kgrag.training.alignment import BACKWARD, FORWARD

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of the Andaman and Nicobar Islands?"
STATES = ("# Port Blair\nPort Blair is the capital of the Andaman and Nicobar Islands, a union "
          "territory of India in the Bay of Bengal, and its only notified town.")
SILENT = ("# London\nLondon is the capital and largest city of England and the United "
          "Kingdom, on the River Thames in the south-east of Great Britain.")


def _request(template: str, unit: str, target: str, **fields) -> dict:
    return {"context": template.format(unit=unit, **fields), "target": target}


def test_the_unit_that_states_the_answer_scores_it_higher_whatever_came_before():
    model = resolve_llm("smollm2-135m")
    backend = LlamaCppBackend(LLMSettings(name=model.name, path=model.path,
                                          sha256=model.sha256))
    forward = _request(FORWARD, STATES, " Port Blair", question=QUESTION)
    backward = _request(BACKWARD, STATES, " " + QUESTION, answer="Port Blair")
    other = _request(FORWARD, SILENT, " Port Blair", question=QUESTION)
    first = [backend.logprob(r) for r in (forward, backward, other)]
    again = [backend.logprob(r) for r in (other, backward, forward)][::-1]
    assert first == again  # each score is a function of its request alone
    assert first[0]["mean"] > first[2]["mean"]
    assert all(score["mean"] < 0 for score in first)
