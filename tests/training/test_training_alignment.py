"""ARK's alignment scores: normalised terms, weights, positives, and calls through the
cache (a rerun or a reweighting scores nothing again)."""

import numpy as np
import pytest

from kgrag.training.alignment import minmax, score_units
from tests.conftest import toy_llm
from tests.standin import RuleLLM

UNITS = ["# Port Blair\nPort Blair is the capital of the Andaman Islands.",
         "# London\nLondon is the capital of England.",
         "# Islands\nThe Andaman Islands lie in the Bay of Bengal."]
WEIGHTS = {"forward": 1.0, "backward": 0.3, "parameter": 1.0}


def test_minmax_scales_to_the_unit_interval_and_flat_scores_to_zero():
    assert minmax(np.array([-3.0, -1.0, -2.0])).tolist() == [0.0, 1.0, 0.5]
    assert minmax(np.array([0.4, 0.4])).tolist() == [0.0, 0.0]


def test_the_unit_that_states_the_answer_is_the_first_positive(cache):
    llm = toy_llm(cache, RuleLLM())
    scored = score_units(llm, "What is the capital of the Andaman Islands?", "Port Blair",
                         ["a", "b", "c"], UNITS, np.array([0.5, 0.5, 0.5]), WEIGHTS)
    assert scored.positives(1) == ["a"]
    assert scored.raw["forward"][0] > scored.raw["forward"][1]
    assert set(scored.raw) == {"forward", "backward", "parameter"}
    assert scored.combined.shape == (3,)
    assert llm.usage.calls == 6  # forward and backward for each unit


def test_a_term_of_weight_zero_is_not_computed_and_reweighting_is_free(cache):
    backend = RuleLLM()
    llm = toy_llm(cache, backend)
    args = ("What is the capital?", "Port Blair", ["a", "b", "c"], UNITS,
            np.array([0.1, 0.9, 0.2]))
    first = score_units(llm, *args, WEIGHTS)
    only_cosine = score_units(llm, *args, {"forward": 0.0, "backward": 0.0, "parameter": 1.0})
    assert set(only_cosine.raw) == {"parameter"}
    assert only_cosine.positives(1) == ["b"]
    no_backward = score_units(llm, *args, {"forward": 1.0, "backward": 0.0, "parameter": 1.0})
    assert backend.calls.count("logprob") == 6  # the reweighted runs replayed the cache
    assert no_backward.combined.tolist() != first.combined.tolist()


@pytest.mark.parametrize("m, expected", [(1, ["b"]), (2, ["b", "c"]), (3, ["b", "c", "a"])])
def test_positives_are_the_top_m_by_combined_score(cache, m, expected):
    cosine_only = {"forward": 0.0, "backward": 0.0, "parameter": 1.0}
    scored = score_units(toy_llm(cache, RuleLLM()), "q?", "capital", ["a", "b", "c"], UNITS,
                         np.array([0.0, 1.0, 0.5]), cosine_only)
    assert scored.positives(m) == expected
