"""``kgrag query SPEC`` with no question (or ``-``) answers each line of standard input,
with the models and the index loaded once."""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from tests.conftest import REPO, write_spec
from tests.standin import RuleLLM

MUSEUMS = [("louvre", "Louvre", "The Louvre is a museum in Paris, France."),
           ("prado", "Prado", "The Prado is a museum in Madrid, Spain."),
           ("uffizi", "Uffizi", "The Uffizi is a gallery in Florence, Italy.")]
QUESTIONS = ["In which city is the Louvre?", "Which museum is in Madrid?",
             "Where is the Uffizi gallery?"]


def museum_spec(project: Path) -> Path:
    (project / "museums.jsonl").write_text("".join(
        json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in MUSEUMS))
    return write_spec(project, corpus={"dataset": "jsonl", "path": "../museums.jsonl"},
                      query=[{"name": "dense", "strategy": "naive", "top_k": 1,
                              "budget_tokens": 40}])


@pytest.mark.parametrize("question", [[], ["-"]])
def test_questions_from_standard_input_share_one_load(project, monkeypatch, capsys,
                                                      question):
    spec = museum_spec(project)
    llm = RuleLLM()
    sessions, strategies = [], []

    def open_session(path):
        sessions.append(real_open(path, llm_backend=llm))  # the stand-in answers
        return sessions[-1]

    def load_strategy(*args):
        strategies.append(real_load(*args))
        return strategies[-1]

    real_open, real_load = api.open_session, api.load_strategy
    monkeypatch.setattr(api, "open_session", open_session)
    monkeypatch.setattr(api, "load_strategy", load_strategy)
    # a blank line is skipped; the last question has no line end
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join([*QUESTIONS[:2], "", QUESTIONS[2]])))
    assert main(["query", str(spec), *question]) == 0
    blocks = capsys.readouterr().out.strip().split("\n\n")
    assert len(sessions) == len(strategies) == 1  # one spec, plan and index for all
    assert [block.splitlines()[0] for block in blocks] == [f"question: {q}"
                                                           for q in QUESTIONS]
    for block, (_, title, _) in zip(blocks, MUSEUMS):  # each question finds its museum
        lines = block.splitlines()
        assert lines[1].startswith("strategy: dense") and lines[2].endswith(f"  {title}")
        assert lines[-1] == "answer: An answer from the evidence"  # its final stop trimmed
    assert llm.calls == ["answer"] * 3



def test_an_answer_holds_its_evidence_once(project, monkeypatch):
    """Was: ``QueryResult`` repeated the evidence's units, titles, sources and trace field
    by field, and dropped its context and parts; now it holds the ``Evidence`` itself."""
    spec = museum_spec(project)
    real_open = api.open_session
    monkeypatch.setattr(api, "open_session", lambda path: real_open(path, llm_backend=RuleLLM()))
    querier = api.open_query(spec)
    evidence = querier.retrieve(QUESTIONS[1])
    result = querier.answer(evidence)
    assert result.evidence is evidence and result.answer == "An answer from the evidence"
    assert result.evidence.titles == ["Prado"] and result.evidence.parts  # parts kept
    asked = querier.ask(QUESTIONS[1])
    assert asked.evidence.unit_ids == evidence.unit_ids and asked.citations is None
    assert {f.name for f in fields(api.QueryResult)} == {"evidence", "answer", "citations"}

def test_a_question_the_models_cannot_take_is_refused_alone(project, monkeypatch, capsys):
    """Was: a line that is not UTF-8 ended the session in UnicodeEncodeError, and a 1 MB
    line ended it with the advice to raise n_ctx."""
    spec = museum_spec(project)
    real_open = api.open_session
    monkeypatch.setattr(api, "open_session", lambda path: real_open(path, llm_backend=RuleLLM()))
    lines = [b"Where \xff\xfe is it?", b"word " * 200_000, QUESTIONS[0].encode()]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(lines) + b"\n")))
    assert main(["query", str(spec)]) == 0
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith("kgrag: ")] == [
        "kgrag: error: line 1: the question is not UTF-8 text (byte 0xff at character 7)",
        ("kgrag: error: line 2: the question is too long: 999,999 characters, more than the "
         "LLM's context window holds (models.llm.n_ctx 8,192 tokens, about 32,768 "
         "characters); ask a shorter one")]
    assert out.count("answer: ") == 1 and f"question: {QUESTIONS[0]}" in out
    assert max(len(line) for line in out.splitlines()) < 1100  # the long one shown cut


SLOW_SESSION = """
import sys, time
from kgrag import api
from kgrag.cli import main
from tests.standin import RuleLLM

class SlowLLM(RuleLLM):
    def generate(self, request):
        if "slowly" in (request.get("prompt") or request["messages"][-1]["content"]):
            time.sleep(120)
        return super().generate(request)

real_open = api.open_session
api.open_session = lambda path: real_open(path, llm_backend=SlowLLM())
sys.exit(main(["query", sys.argv[1], "-"]))
"""


class Lines:
    """The lines a stream gives, read by a thread, waited for by what they hold."""

    def __init__(self, stream) -> None:
        self.seen: list[str] = []
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line holding {text!r} in {timeout} s; saw {self.seen[-5:]}")


def test_ctrl_c_abandons_an_answer_and_at_the_prompt_ends_the_session(project):
    """Was: Ctrl-C did nothing until the end of input (polars' SIGINT handler resumes the
    waiting read), and once it came it ended the whole session."""
    spec = museum_spec(project)
    session = subprocess.Popen(
        [sys.executable, "-c", SLOW_SESSION, str(spec)], cwd=REPO, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    out, err = Lines(session.stdout), Lines(session.stderr)
    try:
        session.stdin.write("Where is the Uffizi, slowly?\n")
        session.stdin.flush()
        out.wait_for("strategy: dense", timeout=300)  # retrieved; the answer sleeps
        time.sleep(1)
        session.send_signal(signal.SIGINT)
        err.wait_for("kgrag: answer abandoned (Ctrl-C)", timeout=30)
        session.stdin.write(QUESTIONS[0] + "\n")
        session.stdin.flush()
        assert out.wait_for("answer: ", timeout=60) == "answer: An answer from the evidence"
        time.sleep(1)
        session.send_signal(signal.SIGINT)  # at the prompt, its input still open
        assert session.wait(timeout=30) == 130
        assert err.wait_for("kgrag: ", timeout=10) == "kgrag: query session ended (Ctrl-C)"
    finally:
        session.kill()
        session.wait()
