"""An extractive answer is the span of the context nearest the model's free answer; the
candidates are scored only when no span is near it. A scripted model behind the real call
cache, real spaCy candidates."""

from __future__ import annotations

from kgrag.answer import INSUFFICIENT
from kgrag.answer.reader import read
from kgrag.models.backend import Completion
from kgrag.models.cache import CallCache
from tests.conftest import toy_llm

UNITS = [
    ("# Christmas Meeting of 1888\nThe Christmas Meeting of 1888 was a chess tournament held "
     "in Copenhagen. It was won by Emanuel Lasker on 28 December 1888."),
    "# Copenhagen\nCopenhagen is the capital of Denmark. About 1,300,000 people live there.",
]
SETTINGS = {"mode": "extractive", "cite": True, "prompt": "completion", "length": "short",
            "max_tokens": None, "focus": 0}  # the whole context (focus: test_answer_focus)
QUESTION = "Who won the chess tournament held in Copenhagen?"


class Scripted:
    """Writes ``free`` as every free answer and scores the target ``favoured`` best."""

    def __init__(self, free: str, favoured: str) -> None:
        self.free, self.favoured = free, favoured
        self.generated = self.scored = 0

    def generate(self, request: dict) -> Completion:
        self.generated += 1
        return Completion(self.free, tokens_in=100, tokens_out=7, cached=False)

    def logprobs(self, requests: list[dict]) -> list[dict]:
        self.scored += len(requests)
        return [{"mean": 0.0 if r["target"].strip() == self.favoured else -5.0,
                 "target_tokens": 2, "tokens": 102} for r in requests]


def answered(tmp_path, free: str, favoured: str, **settings):
    backend = Scripted(free, favoured)
    llm = toy_llm(CallCache(tmp_path), backend)
    return read(llm, UNITS, QUESTION, {**SETTINGS, **settings}), backend


def test_the_free_answer_snaps_to_the_span_it_shares_most_words_with(tmp_path):
    # the model would score "28 December 1888" best; its free answer names Lasker
    reply, backend = answered(tmp_path, "Lasker, the world champion", "28 December 1888")
    assert reply.text == "Emanuel Lasker" and reply.kind == "span"
    assert reply.cited == [1] and reply.text in UNITS[0]
    assert backend.generated == 1 and backend.scored == 0  # no candidate was scored
    assert (reply.tokens_in, reply.tokens_out) == (100, 7)  # the free answer's tokens


def test_every_candidate_can_be_snapped_to_not_only_those_the_llm_would_score(tmp_path):
    # the one candidate the LLM would score is the person the question asks for
    reply, backend = answered(tmp_path, "1,300,000 people", "Emanuel Lasker", candidates=1)
    assert "1,300,000" in reply.text and reply.cited == [2] and backend.scored == 0


def test_without_a_near_span_the_candidates_are_scored(tmp_path):
    # a stranger's name shares no word; the escape snaps to nothing; a copied title line
    # is mended to the escape before it could snap to the title
    for n, free in enumerate(["Garry Kasparov", INSUFFICIENT, "# Christmas Meeting of 1888"]):
        reply, backend = answered(tmp_path / str(n), free, "Emanuel Lasker")
        assert reply.text == "Emanuel Lasker", free
        assert backend.generated == 1 and backend.scored > 1
        assert reply.tokens_in > 100  # the free answer's prompt and the scored spans'


def test_a_yes_no_question_is_judged_without_a_free_answer(tmp_path):
    backend = Scripted("Emanuel Lasker", "No")
    llm = toy_llm(CallCache(tmp_path), backend)
    reply = read(llm, UNITS, "Is Copenhagen the capital of Denmark?", SETTINGS)
    assert (reply.text, reply.kind, reply.cited) == ("no", "judgement", [])
    assert backend.generated == 0 and backend.scored == 2
