"""Fuzz the model server backend: each seeded mutant of a server's reply must end in an
answer or one ``KgragError``, and a refused reply must leave nothing in the call cache.

    python benchmarks/spec_fuzz.py --kind replies --mutants 1000 --seed 0

A fake OpenAI-style server on 127.0.0.1 (``tests.local_server.FakeServer``) answers each
mutant's one call (a text or chat completion, or a chat JSON call with its validation
retries) with a well-formed reply changed once: a field of another type or a number
no JSON library writes (``1e999``, ``NaN``, 400 digits), a key deleted, a text of many
megabytes, a body that is no JSON object (cut short, binary, nested thousands deep), an
HTTP status, a reply dripped a byte at a time (body or headers), a body shorter than
its Content-Length, broken headers, or a broken ``GET /models`` listing. Counts each
outcome; a traceback, a refused reply found in the cache, or a call still running after
``--limit`` seconds is a failure.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests' fake server

from mutants import Tally
from mutants import report as mutants_report

from kgrag.errors import KgragError
from kgrag.models import served
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM, InvalidOutput
from kgrag.models.served import ServerBackend, resolve_llm_entry
from tests.local_server import FakeServer, Reply

TIMEOUT_S = 0.3  # each request's timeout_s: a dripped reply runs out of it on every attempt
COLOR = {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}},
         "required": ["color"], "additionalProperties": False}
# values that replace a field: Python ones, and JSON texts no JSON library writes
OTHER_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1.5, 2**63, "", "x", "x" * 1000, [], [1], {}, {"a": 1},
    [{"text": "y"}], {"content": "y"})
RAW_VALUES = ("1e999", "-1e999", "NaN", "Infinity", "1" + "0" * 400, "1" + "0" * 5000,
              '"\\ud800"', '"a\\u0000b"', "-0", "5e-324", "[" * 3000 + "]" * 3000)
READ = {"choices", "message", "content", "text", "usage", "prompt_tokens",
        "completion_tokens"}  # the fields of a reply kgrag reads
STATUSES = (200, 201, 204, 301, 400, 404, 413, 418, 422, 429, 500, 502, 503, 504)
HEADS = (
    b"HTTP/1.1 200\r\n\r\n",  # no length: the body ends when the connection closes
    b"garbage\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 100_000 + b"\r\n\r\n",
    b"HTTP/1.1 99999 Huh\r\n\r\n",
)

Json = dict[str, Any]
Mutation = Callable[[Json, random.Random, FakeServer], Reply]


def reply_for(chat: bool, text: str) -> Json:
    """A well-formed reply, as llama-cpp-python's server writes one."""
    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
    return {"id": "cmpl-1", "object": "chat.completion" if chat else "text_completion",
            "created": 1, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, **choice}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


def paths(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path below ``data``, parents before children."""
    if path:
        yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from paths(value, (*path, index))


def parent_of(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


def encoded(reply: Json, raw: str | None = None) -> bytes:
    """``reply`` as JSON, its ``"@raw@"`` value written as the text ``raw``."""
    text = json.dumps(reply)
    return (text if raw is None else text.replace('"@raw@"', raw)).encode()


def wrong_type(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    """A field, most often one kgrag reads, of another type or a number out of range."""
    every = list(paths(reply))
    read = [p for p in every if p[-1] in READ or p[-1] == 0]
    path = rng.choice(read if rng.random() < 0.7 else every)
    raw = rng.choice(RAW_VALUES) if rng.random() < 0.4 else None
    parent_of(reply, path)[path[-1]] = "@raw@" if raw else copy.deepcopy(
        rng.choice(OTHER_VALUES))
    return Reply([encoded(reply, raw)])


def delete_key(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    path = rng.choice([p for p in paths(reply) if not isinstance(p[-1], int)])
    del parent_of(reply, path)[path[-1]]
    return Reply([encoded(reply)])


def huge_text(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    """Megabytes of text, with a Content-Length or ending at the connection's close."""
    megabytes = rng.choice((1, 8, 64))
    head, tail = encoded(reply).split(b"Paris" if b"Paris" in encoded(reply) else b"red", 1)
    body = (head, *(b"a" * 2**20,) * megabytes, tail)  # one megabyte, sent again and again
    return Reply(body, length=rng.random() < 0.5)


def not_json(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    whole = encoded(reply)
    return Reply([rng.choice((
        b"", b"null", b"[]", b'"Paris"', b"{", whole[:rng.randrange(1, len(whole))],
        bytes(rng.randrange(256) for _ in range(512)), whole.replace(b"Paris", b"caf\xe9"),
        whole.decode().encode("utf-16"), b"[" * 5_000 + b"]" * 5_000,
        b'{"a": ' * 5_000 + b"1" + b"}" * 5_000, whole + b" trailing"))])


def status(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    body = rng.choice((encoded(reply), b'{"error": "response_format is not supported"}',
                       b"", b"x" * 200_000))
    return Reply([body], status=rng.choice(STATUSES))


def drip(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    whole = encoded(reply)
    return Reply([whole[i:i + 1] for i in range(len(whole))], pause_s=rng.choice((0.05, 0.2)),
                 drip_head=rng.random() < 0.3)


def cut_short(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    whole = encoded(reply)
    claimed = len(whole) + rng.choice((1, 100, 10**9))
    return Reply([whole], length=False,
                 head=f"HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\n\r\n".encode())


def broken_head(reply: Json, rng: random.Random, _fake: FakeServer) -> Reply:
    return Reply([encoded(reply)], length=False, head=rng.choice(HEADS))


def listing(reply: Json, rng: random.Random, fake: FakeServer) -> Reply:
    """The ``GET /models`` listing broken instead; the completion stays well-formed."""
    models = {"object": "list", "data": [{"id": "fake", "object": "model"}]}
    fake.listing = rng.choice((
        encoded({**models, "data": rng.choice(OTHER_VALUES)}),
        encoded({**models, "data": [rng.choice(OTHER_VALUES)]}),
        encoded({**models, "data": [{"id": "fake", "root": rng.choice(OTHER_VALUES)}]}),
        encoded({**models, "data": [{"id": "fake", "root": "/nowhere/m.gguf"}]}),
        encoded({**models, "data": [{"id": "@raw@"}]}, rng.choice(RAW_VALUES)),
        b"{", b"", b'{"data": [' + b'{"id": "m"},' * 200_000 + b'{"id": "fake"}]}'))
    return Reply([encoded(reply)])


MUTATIONS: tuple[Mutation, ...] = (wrong_type, wrong_type, wrong_type, delete_key,
                                   huge_text, not_json, not_json, status, drip, cut_short,
                                   broken_head, listing)


def call(llm: CachedLLM, kind: str, number: int) -> Any:
    """The mutant's one call, its prompt its own (so no mutant hits another's cache)."""
    prompt = f"Mutant {number}: the capital of France is"
    if kind == "complete":
        return llm.complete(prompt, max_tokens=16)
    if kind == "chat":
        return llm.chat([{"role": "user", "content": prompt}], max_tokens=16)
    return llm.chat_json([{"role": "user", "content": prompt}], COLOR, max_tokens=16)


def outcome(llm: CachedLLM, kind: str, number: int) -> str:
    """"answered", "refused" (a ``KgragError``) or "invalid" (a JSON call whose every
    attempt failed validation); a refused reply found cached, or an answer that is not
    a text with its token counts, raises."""
    before = llm.cache.stats().entries
    try:
        answer = call(llm, kind, number)
    except KgragError:
        if llm.cache.stats().entries != before:
            raise AssertionError("a refused reply was cached") from None
        return "refused"
    except InvalidOutput:
        return "invalid"
    if kind != "json":  # what was cached: a text and two token counts
        counts = (answer.tokens_in, answer.tokens_out)
        if not isinstance(answer.text, str) or not all(
                isinstance(n, int) and n >= 0 for n in counts):
            raise TypeError(f"answered {answer.text!r:.60} with tokens {counts!r:.60}")
    return "answered"


OUTCOMES = ("answered", "refused", "invalid", "failed", "hung")


def fuzz(mutants: int, seed: int, limit: float, echo: Callable[[str], None] = print) -> Tally:
    """Run ``mutants`` reply mutants."""
    served.BACKOFF_S = 0.01  # retries in milliseconds: a mutant is one quick call
    current = Reply()
    fake = FakeServer(lambda path, request: current, lifetime_s=24 * 3600)
    entry = {"server": fake.url, "model": "fake", "identity": "hf:org/fake@0",
             "timeout_s": TIMEOUT_S}
    model = resolve_llm_entry(entry, None, "models.llm")
    settings = LLMSettings(name=model.name, path=model.path, sha256=model.sha256)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="kgrag-reply-fuzz-") as folder:
        cache = CallCache(Path(folder) / "calls")
        try:
            for number in range(mutants):
                rng = random.Random(f"{seed}:{number}")
                kind = rng.choice(("complete", "chat", "json"))
                mutation = rng.choice(MUTATIONS)
                fake.listing = None
                current = mutation(reply_for(kind != "complete",
                                             '{"color": "red"}' if kind == "json" else "Paris"),
                                   rng, fake)
                tally.applied[mutation.__name__] += 1
                llm = CachedLLM(settings, cache, ServerBackend(model))
                tally.judge(f"#{number} {kind} ({mutation.__name__})",
                            functools.partial(outcome, llm, kind, number), limit)
                tally.every_hundred(number, echo)
        finally:
            cache.close()
            fake.stop()
    return tally


def report(mutants: int, seed: int, limit: float) -> int:
    """Run the fuzz and print its figures; 1 if any mutant failed."""
    return mutants_report("server-reply", mutants, seed, lambda: fuzz(mutants, seed, limit),
                          OUTCOMES)
