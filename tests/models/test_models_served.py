"""A served model: llama-cpp-python's OpenAI-compatible server, started here on 127.0.0.1
with the bundled SmolLM2, answers through the call cache as an in-process model does.

One server serves the module. It generates, answers with JSON that follows a schema
(through the standard ``response_format``, or the grammar this server takes instead),
and a second run over the same cache makes no request. A server that contradicts the
declared identity, a name it does not serve, a dead server and a public URL are each
one clear error, exit 2 from the command line, and a run keeps what it completed.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kgrag import api, cli
from kgrag.errors import KgragError
from kgrag.models import served
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM
from kgrag.models.registry import resolve_llm
from kgrag.models.served import ServerBackend, resolve_llm_entry
from tests.conftest import RefusingBackend, write_spec
from tests.local_server import LocalServer, free_port

pytestmark = pytest.mark.integration

SMOLLM2 = resolve_llm("smollm2-135m")
IDENTITY = f"sha256:{SMOLLM2.sha256}"
COLOR = {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}},
         "required": ["color"], "additionalProperties": False}


@pytest.fixture(scope="module")
def server() -> str:
    """The base URL of a llama-cpp-python server with SmolLM2, stopped after the module."""
    running = LocalServer(SMOLLM2.path, n_ctx=4096, timeout_s=120)
    try:
        yield running.url
    finally:
        running.stop()


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Back-off in milliseconds, so a dead server is reported at once."""
    monkeypatch.setattr(served, "BACKOFF_S", 0.01)


def served_llm(cache: CallCache, url: str, **entry) -> CachedLLM:
    """A served SmolLM2 (``entry`` changes the spec entry) through ``cache``."""
    model = resolve_llm_entry({"server": url, "model": str(SMOLLM2.path),
                               "identity": IDENTITY, **entry}, None, "models.llm")
    settings = LLMSettings(name=model.name, path=model.path, sha256=model.sha256)
    return CachedLLM(settings, cache, ServerBackend(model))


def test_generation_is_cached_and_a_second_run_makes_no_request(server, cache):
    llm = served_llm(cache, server)
    chat = llm.chat([{"role": "user", "content": "Name a fruit."}], max_tokens=8)
    text = llm.complete("The capital of France is", max_tokens=4)
    assert chat.text.strip() and text.text.strip() and chat.tokens_in > 0
    assert llm.usage.calls == 2 and llm.usage.cache_hits == 0

    again = CachedLLM(llm.settings, cache, RefusingBackend())
    assert again.chat([{"role": "user", "content": "Name a fruit."}], max_tokens=8).text == chat.text
    assert again.complete("The capital of France is", max_tokens=4).text == text.text
    assert again.usage.calls == 0 and again.usage.cache_hits == 2


def test_json_schema_outputs_follow_the_schema_on_both_endpoints(server, cache):
    llm = served_llm(cache, server)
    value, attempts = llm.chat_json([{"role": "user", "content": "Pick a color."}], COLOR,
                                    max_tokens=24)
    assert value["color"] in {"red", "green", "blue"} and attempts == 1
    # this server's chat endpoint rejects the standard field: the grammar alone is sent
    assert llm.backend._refused_fields == {"response_format"}
    value, _ = llm.complete_json("A color, as JSON: ", COLOR, max_tokens=24)
    assert value["color"] in {"red", "green", "blue"}


def test_an_invalid_reply_is_retried_and_never_returned(server, cache):
    """The schema is honoured, the validation is not: every attempt fails, each is
    counted and cached with its verdict, and a rerun replays them without a request."""
    llm = served_llm(cache, server)

    def never(value):
        raise ValueError(f"{value} is never right")

    with pytest.raises(Exception, match="never right") as caught:
        llm.chat_json([{"role": "user", "content": "Pick a color."}], COLOR, max_tokens=24,
                      validate=never)
    assert len(caught.value.errors) == 3 and llm.usage.calls == 3
    again = CachedLLM(llm.settings, cache, RefusingBackend())
    with pytest.raises(Exception, match="never right"):
        again.chat_json([{"role": "user", "content": "Pick a color."}], COLOR, max_tokens=24,
                        validate=never)
    assert again.usage.calls == 0 and again.usage.cache_hits == 3


def test_log_probability_scoring_is_refused_before_any_request(server, cache, project):
    llm = served_llm(cache, server)
    with pytest.raises(KgragError, match="cannot go through a server"):
        llm.logprobs([("The capital of France is", " Paris")])
    models = api.open_session(served_spec(project, "scoring", server)).models
    with pytest.raises(KgragError, match="models.llm is the model served at .* scoring"):
        models.llm("scorer")  # what the scoring step asks for before it scores anything


def test_a_server_that_contradicts_the_declared_identity_is_refused(server, cache):
    other = "sha256:" + "0" * 64
    with pytest.raises(KgragError, match=f"whose sha256 is {SMOLLM2.sha256}, not the declared"):
        served_llm(cache, server, identity=other).chat(
            [{"role": "user", "content": "hi"}], max_tokens=2)
    assert CallCache.stats(cache).entries == 0  # nothing was cached under the wrong name


def test_a_name_the_server_does_not_serve_is_refused(server, cache):
    with pytest.raises(KgragError, match="does not serve 'gpt-4'; it serves '/"):
        served_llm(cache, server, model="gpt-4").complete("hi", max_tokens=2)


def test_a_dead_server_is_one_error(cache, quick_retries):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(KgragError, match=f"the model server at {url} does not answer"):
        served_llm(cache, url).complete("hi", max_tokens=2)


def test_entries_are_checked_before_any_request():
    def entry(**changes):
        return {"server": "http://127.0.0.1:8080/v1", "model": "m", "identity": IDENTITY,
                **changes}

    with pytest.raises(KgragError, match="identity is not: kgrag keys its call cache"):
        resolve_llm_entry(entry(identity=None), None, "models.llm")
    with pytest.raises(KgragError, match="not on this machine or a private network"):
        resolve_llm_entry(entry(server="http://8.8.8.8:8080/v1"), None, "models.llm")
    with pytest.raises(KgragError, match="not on this machine or a private network"):
        resolve_llm_entry(entry(server="http://[::ffff:8.8.8.8]/v1"), None, "models.llm")
    with pytest.raises(KgragError, match="not on this machine or a private network"):
        resolve_llm_entry(entry(server="http://169.254.169.254/v1"), None, "models.llm")
    with pytest.raises(KgragError, match="is not an identity"):
        resolve_llm_entry(entry(identity="sha256:abc"), None, "models.llm")
    with pytest.raises(KgragError, match="not an http"):
        resolve_llm_entry(entry(server="ftp://127.0.0.1/v1"), None, "models.llm")
    for allowed in ("http://localhost:8080/v1", "http://10.0.0.7:8000/v1",
                    "http://192.168.1.20:11434/v1"):
        assert resolve_llm_entry(entry(server=allowed), None, "models.llm").url == allowed
    remote = resolve_llm_entry(entry(server="https://8.8.8.8/v1", allow_remote=True), None,
                               "models.llm")
    assert remote.sha256 == IDENTITY  # the declared identity is the model's identity
    with pytest.raises(KgragError, match="reads the weights of models.llm"):
        served.model_file(remote, "RAS's Graph-LLM training")


def test_a_name_that_resolves_to_a_public_address_is_refused_when_contacted(cache):
    llm = served_llm(cache, "http://dns.google/v1")
    try:
        socket.getaddrinfo("dns.google", None)
    except OSError:
        pytest.skip("no name resolution here")
    with pytest.raises(KgragError, match="not on this machine or a private network"):
        llm.complete("hi", max_tokens=2)


# --- through a spec ------------------------------------------------------------------

def served_spec(project: Path, name: str, url: str, **llm) -> Path:
    """Hybrid extraction (SmolLM2, chat) on one MuSiQue question's paragraphs and answers
    from the served model."""
    model = {"server": url, "model": str(SMOLLM2.path), "identity": IDENTITY, **llm}
    return write_spec(
        project, name,
        corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 1},
        models={"llm": {**model, "temperature": 0, "seed": 0}},
        extraction={"method": "hybrid", "prompt": "chat"},
        graphs=[{"name": "skel", "kind": "skeleton", "beta": 0.15}],
        query=[{"name": "local", "strategy": "ket", "skeleton": "skel", "theta": 1,
                "budget_tokens": 600}],
        answer={"questions": 1, "max_tokens": 16}, evaluate={"metrics": ["em", "coverage"]})


def llm_calls(result) -> tuple[int, int]:
    steps = result.manifest.steps
    return (sum(s["llm"]["calls"] for s in steps), sum(s["llm"]["cache_hits"] for s in steps))


def test_a_spec_runs_on_the_server_concurrently_and_replays_without_it(project, server,
                                                                       tmp_path):
    first = api.run(served_spec(project, "served", server, concurrency=3), echo=lambda s: None)
    calls, _ = llm_calls(first)
    extract = next(s for s in first.manifest.steps if s["name"] == "extract.skel")
    assert calls >= 2 and extract["llm"]["calls"] >= 1 and extract["notes"]["failed_chunks"] == []
    assert first.manifest.data["models"]["llm"] == {"name": str(SMOLLM2.path), "sha256": IDENTITY,
                                            "server": server}

    # concurrency and the URL are in no key: one at a time, from another port, the
    # same steps are reused and every call is a hit
    dead = f"http://127.0.0.1:{free_port()}/v1"
    again = api.run(served_spec(project, "served", dead, concurrency=1), echo=lambda s: None)
    assert llm_calls(again)[0] == 0
    assert [s["fingerprint"] for s in again.manifest.steps] == [
        s["fingerprint"] for s in first.manifest.steps]
    rebuilt = api.run(served_spec(project, "served", dead), echo=lambda s: None,
                      force=("corpus",))
    assert llm_calls(rebuilt) == (0, sum(llm_calls(first)))

    # a bundle of the spec naming the dead server replays on its cached calls alone
    api.bundle(project / "specs" / "served.yaml", tmp_path / "served.tar.gz")
    replayed = api.replay(tmp_path / "served.tar.gz", tmp_path / "replay", echo=lambda s: None)
    assert replayed.model_calls == 0 and replayed.differences == []


def test_a_dead_server_is_exit_2_and_keeps_completed_steps(project, quick_retries, capsys):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    spec = served_spec(project, "dead", dead)
    assert cli.main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("kgrag: error:") == 1 and f"model server at {dead} does not answer" in err
    # the steps before the first model call are kept: a rerun reuses them
    kept = {p.name.rsplit("-", 1)[0] for p in (project / "outputs" / "dead").iterdir()
            if p.is_dir()}
    assert {"corpus", "chunks"} <= kept


def test_extraction_may_name_a_served_model_beside_an_in_process_one(project):
    entry = {"server": "http://127.0.0.1:8080/v1", "model": "qwen", "identity": "hf:org/qwen@abc"}
    spec = write_spec(project, "mixed", models={"llm": {"model": "smollm2-135m"}},
                      extraction={"method": "hybrid", "model": {**entry, "concurrency": 4}},
                      graphs=[{"name": "skel", "kind": "skeleton"}],
                      query=[{"name": "local", "strategy": "ket", "skeleton": "skel",
                              "theta": 1}])
    session = api.open_session(spec)  # no request: the server is contacted on a miss only
    extractor, answerer = session.models.model("extractor"), session.models.model("answerer")
    assert (extractor.sha256, extractor.url, answerer.sha256) == (
        "hf:org/qwen@abc", "http://127.0.0.1:8080/v1", SMOLLM2.sha256)
    assert session.models.executor_for("extractor").workers == 4
    extract = next(s for s in session.plan.steps if s.name == "extract.skel")
    assert extract.config["llm"]["sha256"] == "hf:org/qwen@abc"  # the identity is fingerprinted
    with pytest.raises(KgragError, match="extraction.model.server is set but"):
        api.open_session(write_spec(project, "bad", extraction={
            "model": {**entry, "identity": None}}))
