"""The call cache: what its keys cover, corrupt entries, invalid outputs, stats."""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from kgrag.errors import KgragError
from kgrag.host import CpuShare
from kgrag.models import cache as cache_module
from kgrag.models.cache import CallCache, request_key
from kgrag.models.llm import InvalidOutput
from tests.conftest import REPO, RefusingBackend, ScriptedBackend, toy_llm
from tests.disks import Disk, kgrag_on, needs_mounts

PROMPT = [{"role": "user", "content": "Name a colour."}]
SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}},
          "required": ["colour"]}


def one(cache: CallCache, key: str, payload: dict) -> tuple[dict, bool]:
    """``key``'s payload (``payload`` when it must be computed) and whether it was."""
    (found,), (computed,) = cache.get_or_compute_many([key], "toy", lambda todo: [payload])
    return found, computed


def test_second_identical_call_is_a_hit_with_replayed_tokens(cache):
    first = toy_llm(cache, ScriptedBackend("blue"))
    a = first.chat(PROMPT, max_tokens=8)
    second = toy_llm(cache, RefusingBackend())
    b = second.chat(PROMPT, max_tokens=8)
    assert (a.text, b.text) == ("blue", "blue")
    assert not a.cached and b.cached
    assert (b.tokens_in, b.tokens_out) == (a.tokens_in, a.tokens_out)
    assert second.usage.calls == 0 and second.usage.cache_hits == 1
    assert second.usage.tokens_in == a.tokens_in


@pytest.mark.parametrize("change", [
    {"seed": 1}, {"temperature": 0.7}, {"top_p": 0.9}, {"sha256": "cd" * 32},
])
def test_settings_that_change_the_output_miss(cache, change):
    toy_llm(cache, ScriptedBackend("blue")).chat(PROMPT, max_tokens=8)
    other = toy_llm(cache, ScriptedBackend("red"), **change)
    assert other.chat(PROMPT, max_tokens=8).text == "red"
    assert other.usage.calls == 1


def test_settings_that_do_not_change_the_output_hit(cache):
    toy_llm(cache, ScriptedBackend("blue")).chat(PROMPT, max_tokens=8)
    other = toy_llm(cache, RefusingBackend(), n_threads=7, n_gpu_layers=3, n_ctx=512,
                path=Path("/elsewhere/renamed.gguf"), name="renamed")
    assert other.chat(PROMPT, max_tokens=8).text == "blue"


def test_grammar_max_tokens_and_prompt_are_part_of_the_key(cache):
    base = toy_llm(cache, ScriptedBackend("x"))
    base.chat(PROMPT, max_tokens=8)
    base.chat(PROMPT, max_tokens=8, grammar='root ::= "blue"')
    base.chat(PROMPT, max_tokens=9)
    base.complete("Name a colour.", max_tokens=8)
    assert base.usage.calls == 4


def test_request_key_ignores_dict_order():
    assert request_key("llm", {"a": 1, "b": [1, 2]}) == request_key("llm", {"b": [1, 2], "a": 1})


def test_corrupt_entry_is_reported_treated_as_miss_and_replaced(cache, caplog):
    first = toy_llm(cache, ScriptedBackend("blue"))
    first.chat(PROMPT, max_tokens=8)
    key = request_key("llm", first._request({"messages": PROMPT}, 8, 0, None, None, []))
    cache._cache.set(key, b"0123\n{truncated")
    again = toy_llm(cache, ScriptedBackend("green"))
    with caplog.at_level(logging.WARNING):
        assert again.chat(PROMPT, max_tokens=8).text == "green"
    assert "corrupt cache entry" in caplog.text
    assert toy_llm(cache, RefusingBackend()).chat(PROMPT, max_tokens=8).text == "green"


def test_invalid_output_is_retried_and_never_returned_as_valid(cache):
    backend = ScriptedBackend("not json", json.dumps({"colour": "blue"}))
    value, attempts = toy_llm(cache, backend).chat_json(PROMPT, SCHEMA, max_tokens=16)
    assert value == {"colour": "blue"} and attempts == 2
    assert backend.requests[0]["seed"] != backend.requests[1]["seed"]
    stored = [json.loads(bytes(cache._cache[k]).decode().split("\n", 1)[1])
              for k in cache._cache.iterkeys() if not k.startswith("stats:")]
    assert sorted(e["valid"] for e in stored) == [False, True]
    # A warm replay walks through the same attempts without the model.
    replay = toy_llm(cache, RefusingBackend())
    assert replay.chat_json(PROMPT, SCHEMA, max_tokens=16) == ({"colour": "blue"}, 2)
    assert replay.usage.calls == 0 and replay.usage.cache_hits == 2


def test_validator_rejection_counts_as_invalid(cache):
    def only_red(obj):
        if obj["colour"] != "red":
            raise ValueError("not red")
        return obj["colour"]

    backend = ScriptedBackend(json.dumps({"colour": "blue"}))
    with pytest.raises(InvalidOutput) as err:
        toy_llm(cache, backend, max_retries=2).chat_json(PROMPT, SCHEMA, max_tokens=16,
                                                     validate=only_red)
    assert len(err.value.errors) == 3 and "not red" in err.value.errors[0]
    with pytest.raises(InvalidOutput):
        toy_llm(cache, RefusingBackend(), max_retries=2).chat_json(PROMPT, SCHEMA, max_tokens=16,
                                                               validate=only_red)


def test_stats_count_entries_and_hits_by_model(cache):
    toy_llm(cache, ScriptedBackend("blue")).chat(PROMPT, max_tokens=8)
    toy_llm(cache, RefusingBackend()).chat(PROMPT, max_tokens=8)
    stats = cache.stats()
    assert stats.entries == 1 and stats.size_bytes > 0
    assert stats.by_model["toy"] == {"hits": 1, "misses": 1}
    assert cache.clear() >= 1 and cache.stats().entries == 0


def test_a_damaged_cache_database_is_a_clear_error(tmp_path):
    from kgrag.errors import KgragError

    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "cache.db").write_bytes(b"this is not an sqlite database" * 100)
    with pytest.raises(KgragError, match="is damaged") as raised:
        CallCache(folder)
    assert "move or delete that folder" in str(raised.value)


# --- a cache folder that cannot take writes is not a damaged cache ---

def sqlite_error(message: str, code: int) -> sqlite3.OperationalError:
    """An error as sqlite raises it, result code included."""
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code
    return exc


def keeps_the_cache(message: str) -> bool:
    """The advice for a cache that is sound: never to delete it."""
    return ("is damaged" not in message and "move or delete" not in message
            and "do not delete it" in message)


@pytest.mark.parametrize("exc, cause", [
    (sqlite_error("database or disk is full", sqlite3.SQLITE_FULL), "no space left on its disk"),
    (sqlite_error("attempt to write a readonly database", sqlite3.SQLITE_READONLY),
     "it cannot be written"),
    (OSError(28, "No space left on device"), "no space left on its disk"),
])
def test_a_full_or_read_only_cache_folder_is_not_called_damaged(tmp_path, monkeypatch, exc,
                                                                cause):
    """Was: "the model-call cache ... is damaged ... move or delete that folder (its calls
    will be recomputed)" for a healthy cache on a full or read-only disk."""
    def refuse(*args, **kwargs):
        raise exc

    monkeypatch.setattr(cache_module.diskcache, "Cache", refuse)
    with pytest.raises(KgragError) as raised:
        CallCache(tmp_path / "calls")
    message = str(raised.value)
    assert message.startswith(f"cannot write the model-call cache at {tmp_path / 'calls'}: "
                              f"{cause}") and keeps_the_cache(message)


def test_a_disk_that_fills_during_a_run_is_the_same_clear_error(cache, monkeypatch):
    def full(*args, **kwargs):
        raise sqlite_error("database or disk is full", sqlite3.SQLITE_FULL)

    monkeypatch.setattr(cache._cache, "set", full)
    with pytest.raises(KgragError) as raised:
        one(cache, "toy:a", {"text": "a"})
    assert "no space left on its disk" in str(raised.value)
    assert keeps_the_cache(str(raised.value))


def cache_with_entries(folder: Path) -> None:
    cache = CallCache(folder)
    cache.set_many([(f"toy:{i}", {"text": "x" * 200}) for i in range(50)])
    cache.close()


@needs_mounts
@pytest.mark.parametrize("disk, cause", [
    ({"read_only": True}, "it is on a read-only file system"),
    ({"full": True}, "no space left on its disk"),
])
def test_a_real_full_or_read_only_cache_folder_keeps_its_calls(tmp_path, disk, cause):
    folder = tmp_path / "calls"
    cache_with_entries(folder)
    done = kgrag_on([Disk(folder, 2048, **disk)], "cache", "stats", "--dir", str(folder))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [message] = [line for line in done.stderr.splitlines() if line.startswith("kgrag: ")]
    assert message.startswith(f"kgrag: error: cannot write the model-call cache at {folder}: "
                              f"{cause}") and keeps_the_cache(message)
    assert CallCache(folder).stats().entries == 50  # the folder itself, never mounted over


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_file_is_not_called_full():
    """Was: "no space left on its disk" for /proc, whose file system counts no blocks."""
    with pytest.raises(KgragError) as raised:
        CallCache(Path("/proc"))
    message = str(raised.value)
    assert message.startswith("cannot write the model-call cache at /proc: it takes no new "
                              "file: no such file or directory") and keeps_the_cache(message)
    assert "no space" not in message


# --- claims: a call another process is computing is waited for, not paid twice ---

TWO_PROCESSES = """
import json, sys, time
from pathlib import Path
from kgrag.models.cache import CallCache
from kgrag.models.backend import Completion, LLMSettings
from kgrag.models.llm import CachedLLM

class SlowBackend:
    calls = 0
    def generate(self, request):
        SlowBackend.calls += 1
        time.sleep(0.6)
        return Completion("answer " + request["prompt"], 5, 2, cached=False)

settings = LLMSettings(name="toy", path=Path("/models/toy.gguf"), sha256="ab" * 32)
llm = CachedLLM(settings, CallCache(Path(sys.argv[1])), SlowBackend())
texts = [llm.complete(f"question {i}", max_tokens=4).text for i in range(4)]
print(json.dumps({"calls": SlowBackend.calls, "hits": llm.usage.cache_hits, "texts": texts}))
"""


def test_two_processes_on_one_cache_pay_each_call_once(tmp_path):
    """Was: two runs started together both paid every call (120 misses, 0 hits)."""
    script = tmp_path / "worker.py"
    script.write_text(TWO_PROCESSES)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    workers = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "calls")],
                                stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [json.loads(w.communicate(timeout=120)[0]) for w in workers]
    assert all(w.returncode == 0 for w in workers)
    assert sum(r["calls"] for r in results) == 4
    assert sum(r["hits"] for r in results) == 4
    assert results[0]["texts"] == results[1]["texts"] == [f"answer question {i}"
                                                          for i in range(4)]


def _holder_of(process: subprocess.Popen) -> dict:
    return {"host": socket.gethostname(), "pid": process.pid,
            "started": psutil.Process(process.pid).create_time()}


def test_a_call_claimed_by_a_live_process_is_waited_for(cache, monkeypatch):
    monkeypatch.setattr(cache_module, "CLAIM_POLL_S", 0.05)
    key = request_key("llm", {"prompt": "slow"})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        cache._cache.add(f"claim:{key}", _holder_of(other))
        threading.Timer(0.3, cache.set, (key, {"text": "theirs"})).start()
        payload, computed = one(cache, key, {"text": "ours"})
    finally:
        other.kill()
        other.wait()
    assert (payload, computed) == ({"text": "theirs"}, False)


def test_a_claim_left_by_a_killed_process_does_not_block(cache):
    key = request_key("llm", {"prompt": "orphaned"})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    holder = _holder_of(dead)
    dead.wait()
    cache._cache.add(f"claim:{key}", holder)
    payload, computed = one(cache, key, {"text": "ours"})
    assert (payload, computed) == ({"text": "ours"}, True)
    assert f"claim:{key}" not in cache._cache  # released after computing
    assert cache.stats().entries == 1  # claims are not entries


def test_a_claim_this_process_left_in_an_abandoned_call_does_not_block(cache, monkeypatch):
    """A Ctrl-C between claiming and releasing (``kgrag query`` abandoning an answer) left
    a claim of this live process, which it would have waited for an hour."""
    monkeypatch.setattr(cache_module, "CLAIM_TTL_S", 2.0)
    key = request_key("llm", {"prompt": "abandoned"})
    assert cache._claim([key]) == {key}  # claimed, never released: the call was abandoned
    cache_module.abandon_claims()
    started = time.monotonic()
    payload, computed = one(cache, key, {"text": "ours"})
    assert (payload, computed) == ({"text": "ours"}, True) and time.monotonic() - started < 1
    assert f"claim:{key}" not in cache._cache


@pytest.mark.parametrize(("cores", "others", "threads"), [
    (2, 0.0, 2), (2, 0.2, 2), (2, 0.9, 1), (2, 1.8, 1), (2, 3.5, 1), (4, 1.0, 3), (4, 2.9, 1)])
def test_llama_threads_are_the_cores_others_leave_free(cores, others, threads, monkeypatch):
    share = CpuShare(cores)
    monkeypatch.setattr(share, "others_busy", lambda: others)
    assert share.threads() == threads


def test_others_busy_sees_another_process_spinning():
    share = CpuShare(2)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        share.others_busy()  # a new window, from now on
        time.sleep(1.0)
        assert share.others_busy() > 0.5
    finally:
        spinner.kill()
        spinner.wait()


def test_recording_collects_every_key_used_hit_or_computed(cache):
    cache.set("toy:old", {"text": "x"})
    with cache.recording() as used:
        one(cache, "toy:old", {"text": "never"})
        one(cache, "toy:new", {"text": "y"})
        cache.get_many(["toy:old", "toy:absent"], "toy")
    one(cache, "toy:later", {"text": "z"})
    assert used == {"toy:old", "toy:new", "toy:absent"}


def test_entries_exports_payloads_and_names_what_is_gone(cache):
    cache.set_many([("toy:a", {"text": "a"}), ("toy:b", {"text": "b"})])
    assert list(cache.entries(["toy:b", "toy:a"])) == [("toy:b", {"text": "b"}),
                                                        ("toy:a", {"text": "a"})]
    with pytest.raises(KgragError, match=r"no longer holds 1 of the entries .*first: toy:c"):
        list(cache.entries(["toy:a", "toy:c"]))


def test_a_sealed_cache_answers_hits_and_refuses_every_miss(tmp_path):
    CallCache(tmp_path / "c").set("toy:a", {"text": "a"})
    sealed = CallCache(tmp_path / "c", sealed=True)
    assert one(sealed, "toy:a", {"text": "never"}) == ({"text": "a"}, False)
    with pytest.raises(KgragError, match=r"no entry for 1 request\(s\) of toy \(first: toy:b\)"):
        one(sealed, "toy:b", {"text": "computed"})
    with pytest.raises(KgragError, match=r"no entry for 2 request\(s\) of toy \(first: toy:c\)"):
        sealed.get_many(["toy:a", "toy:c", "toy:d"], "toy")
    assert list(sealed.entries(["toy:a"])) == [("toy:a", {"text": "a"})]  # nothing was stored
    with pytest.raises(KgragError):
        list(sealed.entries(["toy:b"]))
