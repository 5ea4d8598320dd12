"""The Graph-LLM training's kept state: a stop holds off until a step's update and its
state are written, SIGTERM stops as Ctrl-C does, and (on the bundled SmolLM2) a training
stopped after k steps and run again ends with the model and loss curve of one never
stopped."""

import os
import signal

import pytest
import torch

from kgrag.errors import interrupted, stop_on_sigterm
from kgrag.training.graph_llm import MANIFEST, GraphLLMSettings, Sample
from kgrag.training.graph_llm_state import STATE, held_signals
from kgrag.training.graph_llm_train import train_graph_llm
from tests.training.test_graph_llm import PROMPT, TINY, _base, _embed


@pytest.fixture
def sigterm_restored():
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def test_a_stop_inside_held_signals_acts_at_the_end_of_the_block():
    ran = []
    with pytest.raises(KeyboardInterrupt):
        with held_signals():
            os.kill(os.getpid(), signal.SIGINT)
            ran.append("after the signal")
        ran.append("after the block")
    assert ran == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_stops_as_ctrl_c_with_one_line_saying_what_was_kept(sigterm_restored):
    stop_on_sigterm()
    with pytest.raises(KeyboardInterrupt) as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
    assert interrupted(stopped.value) == (
        "kgrag: interrupted; completed steps and cached calls are kept — run again to resume")
    said = interrupted(KeyboardInterrupt("training stopped after step 3 of 8"))
    assert said.startswith("kgrag: interrupted (training stopped after step 3 of 8); ")
    assert "\n" not in said


def _stopping_after(n):
    """A progress hook that stops the training (as Ctrl-C does) after ``n`` steps."""
    def progress(steps, count):
        for done, step in enumerate(steps):
            if done == n:
                raise KeyboardInterrupt
            yield step
    return progress


def _weights(folder):
    from safetensors.torch import load_file

    return {**load_file(folder / "adapter" / "adapter_model.safetensors"),
            **torch.load(folder / "encoder.pt", weights_only=True)}


@pytest.mark.integration
def test_a_stopped_training_continues_to_the_model_and_curve_of_one_never_stopped(tmp_path):
    samples = [Sample(PROMPT, "Paris", [[("France", "capital", "Paris")]]),
               Sample(PROMPT, "Rome", [[("Italy", "capital", "Rome")]]),
               Sample("Is more retrieval needed?", "[SUFFICIENT]", []),
               Sample("Who wrote it?", "[SUBQ] Who wrote Hamlet?",
                      [[("Hamlet", "written by", "Shakespeare")]]),
               Sample(PROMPT, "Berlin", [[("Germany", "capital", "Berlin")]])]
    # dropouts on: the kept torch RNG must give the resumed steps the same masks; 3 steps
    # per epoch (batches of 1, 2 per step): the stop falls mid-epoch, the resumed run
    # shuffles the next epoch from the kept shuffle state
    settings = GraphLLMSettings(**{**TINY.__dict__, "epochs": 2, "batch_size": 1,
                                   "grad_accumulation": 2, "dropout": 0.1,
                                   "lora_dropout": 0.05, "warmup_ratio": 0.3})
    whole = train_graph_llm(samples, settings, _base(), _embed, tmp_path / "whole", threads=1)
    resume = tmp_path / "resume"
    with pytest.raises(KeyboardInterrupt, match=r"stopped after step 2 of 6; the state "):
        train_graph_llm(samples, settings, _base(), _embed, tmp_path / "parts", threads=1,
                        progress=_stopping_after(2), resume=resume)
    assert (resume / STATE).exists() and not (tmp_path / "parts").exists()
    ran = []

    def counting(steps, count):
        for step in steps:
            ran.append(step)
            yield step

    parts = train_graph_llm(samples, settings, _base(), _embed, tmp_path / "parts",
                            threads=1, progress=counting, resume=resume)
    assert ran == [2, 3, 4, 5]  # only the steps not kept ran
    assert parts["steps"] == whole["steps"] and len(whole["steps"]) == 6
    assert parts["epoch_losses"] == whole["epoch_losses"]
    assert [(p["from_step"], p["to_step"]) for p in parts["pieces"]] == [(0, 2), (2, 6)]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "parts")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert (tmp_path / "parts" / MANIFEST).read_text() == (
        tmp_path / "whole" / MANIFEST).read_text()
    # the state of the last step is kept too: run again, it trains nothing
    again = train_graph_llm(samples, settings, _base(), _embed, tmp_path / "again",
                            threads=1, progress=counting, resume=resume)
    assert ran == [2, 3, 4, 5] and again["steps"] == whole["steps"]
