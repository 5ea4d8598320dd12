"""A model server that answers badly: a fake OpenAI-style server on 127.0.0.1 (no model)
sends replies of the wrong shape, far too long, or a byte at a time.

Each ends in one ``KgragError`` that names the server and what was wrong, and nothing
of it is cached, so a rerun against a good server asks again and gets a real answer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from kgrag import api, cli
from kgrag.errors import KgragError
from kgrag.models import served
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM
from kgrag.models.served import ServerBackend, resolve_llm_entry
from kgrag.models.server_reply import reply_limit
from tests.conftest import REPO, write_spec
from tests.local_server import FakeServer, Reply, completion

IDENTITY = "hf:org/fake@0"


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Back-off in milliseconds, so a server that never answers in time is reported at once."""
    monkeypatch.setattr(served, "BACKOFF_S", 0.01)


def served_llm(cache: CallCache, url: str, **entry) -> CachedLLM:
    model = resolve_llm_entry({"server": url, "model": "fake", "identity": IDENTITY, **entry},
                              None, "models.llm")
    settings = LLMSettings(name=model.name, path=model.path, sha256=model.sha256)
    return CachedLLM(settings, cache, ServerBackend(model))


class Switchable:
    """Answers ``bad`` until ``good`` is set: the same server, broken, then mended."""

    def __init__(self, bad: Reply) -> None:
        self.bad, self.good = bad, False

    def __call__(self, path: str, request: dict) -> Reply:
        return Reply([completion("Paris", chat=path == "/chat/completions")]) if self.good \
            else self.bad


WRONG_SHAPES = {  # reply body -> the field the error names
    "text object": (completion({"a": 1}), r"an object as choices\[0\]\.text"),
    "text integer": (completion(5), r"5 as choices\[0\]\.text"),
    "usage integer": (completion(usage=5), "5 as usage,"),
    "prompt_tokens 1e999": (completion().replace(b'"prompt_tokens": 5', b'"prompt_tokens": 1e999'),
                            "inf as usage.prompt_tokens"),
    "completion_tokens -1": (completion(usage={"completion_tokens": -1}),
                             "-1 as usage.completion_tokens"),
    "completion_tokens string": (completion(usage={"completion_tokens": "1"}),
                                 "the string '1' as usage.completion_tokens"),
    "no choices": (completion().replace(b'"choices"', b'"choice"'), "no choices"),
    "empty choices": (json.dumps({"choices": []}).encode(), "at least one choice"),
    "choice string": (json.dumps({"choices": ["Paris"]}).encode(), r"as choices\[0\],"),
    "lone surrogate": (completion("Paris \ud800").replace(b"\\\\", b"\\"),
                       "lone UTF-16 surrogate"),
    "nested thousands deep": (b"[" * 20_000 + b"]" * 20_000, "no JSON"),
    "array": (b"[1, 2]", "a JSON array, not an object"),
}


@pytest.mark.parametrize("name", WRONG_SHAPES)
def test_a_reply_of_the_wrong_shape_is_one_error_and_never_cached(name, cache):
    body, field = WRONG_SHAPES[name]
    answer = Switchable(Reply([body]))
    with FakeServer(answer) as fake:
        with pytest.raises(KgragError, match=f"the server at {fake.url} answered "
                                             f"/completions with .*{field}"):
            served_llm(cache, fake.url).complete("The capital of France is", max_tokens=4)
        assert CallCache.stats(cache).entries == 0

        answer.good = True  # the server mended: the rerun asks it, and gets a real answer
        again = served_llm(cache, fake.url)
        assert again.complete("The capital of France is", max_tokens=4).text == "Paris"
        assert again.usage.calls == 1 and again.usage.tokens_in == 5


def test_a_chat_reply_without_its_content_is_refused(cache):
    no_content = json.dumps({"choices": [{"message": {"role": "assistant"}}]}).encode()
    with FakeServer(lambda path, request: Reply([no_content])) as fake, pytest.raises(
            KgragError, match=r"/chat/completions with no choices\[0\]\.message\.content"):
        served_llm(cache, fake.url).chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert CallCache.stats(cache).entries == 0


def test_a_listing_of_the_wrong_shape_is_refused(cache):
    with FakeServer(Switchable(Reply()), listing=b'{"data": 5}') as fake, pytest.raises(
            KgragError, match=f"{fake.url} answered /models with 5 as data"):
        served_llm(cache, fake.url).complete("hi", max_tokens=4)


def test_a_reply_longer_than_max_tokens_allows_is_refused_unread(cache):
    """64 MB of text for 16 tokens: refused once the limit is passed, and read no further
    (what the server sends before it sees the hang-up is what the sockets' buffers hold)."""
    huge = [b'{"choices": [{"text": "', *[b"a" * 2**20] * 64, b'"}]}']
    for length in (True, False):  # with a Content-Length, and without (ends at close)
        with FakeServer(lambda path, request, length=length: Reply(huge, length=length)
                        ) as fake:
            with pytest.raises(KgragError, match=f"answered /completions with more than "
                                                 f"{reply_limit(16):,} bytes"):
                served_llm(cache, fake.url).complete("Say a lot", max_tokens=16)
            time.sleep(0.5)
            assert fake.sent < 16 * 2**20
    assert CallCache.stats(cache).entries == 0


@pytest.mark.parametrize("drip_head", [False, True], ids=["body", "headers"])
def test_the_timeout_bounds_the_whole_request_not_each_read(cache, drip_head):
    """A byte every 0.1 s never trips a per-read timeout; 0.5 s for the whole request
    does, on every attempt (4, backing off 10, 20 and 40 ms)."""
    body = completion()
    dripping = Reply([body[i:i + 1] for i in range(len(body))], pause_s=0.1,
                     drip_head=drip_head)
    with FakeServer(lambda path, request: dripping) as fake:
        started = time.monotonic()
        with pytest.raises(KgragError, match=f"the model server at {fake.url} does not "
                                             r"answer \(no whole reply within 0.5 s; 4 attempts"):
            served_llm(cache, fake.url, timeout_s=0.5).complete("hi", max_tokens=4)
        assert time.monotonic() - started < 4 * 0.5 + 1.5
    assert CallCache.stats(cache).entries == 0


def test_a_bad_reply_in_a_run_is_one_line_and_exit_2_and_a_rerun_asks_again(project, capsys):
    answer = Switchable(Reply([completion(usage=5, chat=True)]))
    with FakeServer(answer) as fake:
        spec = served_spec(project, "bad-reply", fake.url)
        assert cli.main(["run", str(spec)]) == 2
        err = capsys.readouterr().err
        assert err.count("kgrag: error:") == 1 and "Traceback" not in err
        assert f"the server at {fake.url} answered /chat/completions with 5 as usage" in err

        answer.good = True  # nothing of the bad reply was kept: the answer is asked again
        assert cli.main(["run", str(spec)]) == 0
        assert fake.requests.count(("POST", "/v1/chat/completions")) == 2


def test_cache_stats_name_the_served_model(project, isolated_cache, capsys):
    with FakeServer(Switchable(Reply([completion()]))) as fake:
        llm = api.open_session(served_spec(project, "stats", fake.url)).models.llm("answerer")
        llm.complete("The capital of France is", max_tokens=4)
    assert cli.main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert "  fake " in out and "misses        1" in out


def served_spec(project, name: str, url: str):
    """BM25 retrieval over the project's small corpus (no embedder to load), answered by
    the served model."""
    return write_spec(
        project, name, corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
        models={"llm": {"server": url, "model": "fake", "identity": IDENTITY}},
        query=[{"name": "bm25", "strategy": "bm25", "budget_tokens": 200}],
        answer={"questions": 1, "max_tokens": 16, "prompt": "chat"})


def test_the_reply_fuzz_ends_every_mutant_in_an_answer_or_a_kgrag_error(tmp_path):
    """``benchmarks/spec_fuzz.py --kind replies`` on 60 mutants (the benchmark runs 1,000)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "KGRAG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "spec_fuzz.py"),
                           "--kind", "replies", "--mutants", "60", "--seed", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    counts = dict(re.findall(r"^  ([a-z]+) +(\d+)$", done.stdout, flags=re.MULTILINE))
    assert counts["failed"] == counts["hung"] == "0"
    assert int(counts["answered"]) > 0 and int(counts["refused"]) > 0
