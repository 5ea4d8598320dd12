"""The Graph-LLM training's kept state: a stop holds off until a step's update and its
state are written, SIGTERM stops as Ctrl-C does, a stop ignored by whoever started kgrag
stays ignored, and (on the bundled SmolLM2) a training stopped after k steps and run
again ends with the model and loss curve of one never stopped."""

import os
import signal
import subprocess
import sys

import pytest
import torch

from kgrag.errors import interrupted, stop_on_sigterm
from kgrag.training.graph_llm.model import MANIFEST, GraphLLMSettings, Sample
from kgrag.training.graph_llm.state import STATE, held_signals
from kgrag.training.graph_llm.train import train_graph_llm
from tests.conftest import REPO
from tests.training.test_graph_llm import PROMPT, TINY, _base, _embed


@pytest.fixture
def stops_as_python_sets_them():
    """Ctrl-C and SIGTERM as a Python started from a terminal has them, whatever the
    test run was started with (``nohup make test &`` ignores SIGINT), restored after."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def test_a_stop_inside_held_signals_acts_at_the_end_of_the_block(stops_as_python_sets_them):
    ran = []
    with pytest.raises(KeyboardInterrupt):
        with held_signals():
            os.kill(os.getpid(), signal.SIGINT)
            ran.append("after the signal")
        ran.append("after the block")
    assert ran == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_stops_as_ctrl_c_with_one_line_saying_what_was_kept(stops_as_python_sets_them):
    stop_on_sigterm()
    with pytest.raises(KeyboardInterrupt) as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
    assert interrupted(stopped.value) == (
        "kgrag: interrupted; completed steps and cached calls are kept — run again to resume")
    said = interrupted(KeyboardInterrupt("training stopped after step 3 of 8"))
    assert said.startswith("kgrag: interrupted (training stopped after step 3 of 8); ")
    assert "\n" not in said


# started as a shell starts a background job: the stop ignored, then Python exec'd
STARTED_IGNORING = ("import os, signal, sys; signal.signal(int(sys.argv[1]), signal.SIG_IGN); "
                    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")
# kgrag's stop handling, a held block that the parent stops, a process started inside it
# (does it ignore the stop too?), then a stop outside the block
STOPPED = """
import subprocess, sys
from kgrag.errors import stop_on_sigterm
from kgrag.training.graph_llm.state import held_signals

stop = int(sys.argv[1])
stop_on_sigterm()
with held_signals():
    print("held", flush=True)
    sys.stdin.readline()
    started = subprocess.run([sys.executable, "-c", "import signal, sys; "
                              "print(signal.getsignal(int(sys.argv[1])) == signal.SIG_IGN)",
                              str(stop)], capture_output=True, text=True, check=True)
print("after the block; a process started in it ignores the stop:", started.stdout.strip(),
      flush=True)
sys.stdin.readline()
print("done")
"""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_ignored_by_whoever_started_kgrag_stays_ignored(stop):
    """``nohup kgrag run ... &`` from a script starts kgrag with SIGINT ignored: the user
    chose that no Ctrl-C reaches it, inside held blocks and in the processes it starts."""
    number = str(int(stop))
    with subprocess.Popen([sys.executable, "-c", STARTED_IGNORING, number, "-c", STOPPED,
                           number], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}) as run:
        said = ["held\n", "after the block; a process started in it ignores the stop: True\n"]
        for line in said:  # stopped inside the held block, then outside it
            assert run.stdout.readline() == line
            run.send_signal(stop)
            run.stdin.write("\n")
            run.stdin.flush()
        assert run.communicate(timeout=60) == ("done\n", None)
    assert run.returncode == 0


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
