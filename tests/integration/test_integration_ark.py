"""ARK's alignment scores on the real SmolLM2 through llama.cpp: a unit that states the
answer scores it higher; the fast scorer (each shared prefix evaluated once, logits at
the target positions only) gives the reference scorer's scores on real MuSiQue pairs;
a score does not depend on the order of the batch it came in, and barely (float
rounding) on the rest of the batch."""

from __future__ import annotations

import pytest

from kgrag.models.backend import LLMSettings
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.registry import resolve_llm
from kgrag.training.alignment import BACKWARD, FORWARD
from tests.training.reference_scorer import ReferenceScorer, fixed_pairs

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of the Andaman and Nicobar Islands?"
STATES = ("# Port Blair\nPort Blair is the capital of the Andaman and Nicobar Islands, a union "
          "territory of India in the Bay of Bengal, and its only notified town.")
SILENT = ("# London\nLondon is the capital and largest city of England and the United "
          "Kingdom, on the River Thames in the south-east of Great Britain.")
SAME = 1e-4  # scores equal to this (the benchmark's criterion)


def _request(template: str, unit: str, target: str, **fields) -> dict:
    return {"context": template.format(unit=unit, **fields), "target": target}


@pytest.fixture(scope="module")
def settings() -> LLMSettings:
    model = resolve_llm("smollm2-135m")
    return LLMSettings(name=model.name, path=model.path, sha256=model.sha256, n_ctx=4096)


def test_the_unit_that_states_the_answer_scores_it_higher_whatever_came_before(settings):
    backend = LlamaCppBackend(settings)
    forward = _request(FORWARD, STATES, " Port Blair", question=QUESTION)
    backward = _request(BACKWARD, STATES, " " + QUESTION, answer="Port Blair")
    other = _request(FORWARD, SILENT, " Port Blair", question=QUESTION)
    first = backend.logprobs([forward, backward, other])
    again = backend.logprobs([other, backward, forward])[::-1]
    assert first == again  # the order of a batch changes nothing
    alone = [backend.logprobs([r])[0] for r in (forward, backward, other)]
    assert all(abs(a["mean"] - b["mean"]) < SAME for a, b in zip(first, alone))
    assert first[0]["mean"] > first[2]["mean"]
    assert all(score["mean"] < 0 for score in first)


def test_the_fast_scorer_gives_the_reference_scores_on_real_pairs(settings):
    per_question = fixed_pairs(questions=2, units=3)
    reference = ReferenceScorer(settings, threads=2)
    fast = LlamaCppBackend(settings)
    for requests in per_question:
        got = fast.logprobs(requests)
        for request, score in zip(requests, got):
            expected = reference.logprob(request)
            assert abs(score["mean"] - expected["mean"]) < SAME
            assert score["tokens"] == expected["tokens"]
