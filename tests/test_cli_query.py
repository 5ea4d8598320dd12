"""``kgrag query SPEC`` with no question (or ``-``) answers each line of standard input,
with the models and the index loaded once."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kgrag import api
from kgrag.cli import main
from tests.conftest import write_spec
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
