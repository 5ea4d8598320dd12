"""What kgrag takes from a model server's reply: a body no bigger than the request asked
for, read a piece at a time, and the completion in it checked field by field.

Why: a completion is cached as soon as the backend returns it, and a cached answer is
replayed without asking the server again. A reply of the wrong shape (a ``text`` that
is an object, ``usage: 5``, a token count of ``1e999``) must therefore be refused here,
as one ``KgragError`` that names the server and the field, never turned into a cached
answer that breaks every later run. A reply far longer than ``max_tokens`` allows is
refused as it streams in, so a broken server cannot make kgrag hold or store it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kgrag.errors import KgragError
from kgrag.models.backend import Completion

BYTES_PER_TOKEN = 64  # generous: a token is a few characters, escaped as \uXXXX at worst
ENVELOPE_BYTES = 64 * 1024  # the JSON around the text: ids, model name, usage, timings
LISTING_BYTES = 1024 * 1024  # GET /models: a list of names
MAX_TOKEN_COUNT = 2**31 - 1  # more tokens than any context window holds


def reply_limit(max_tokens: int) -> int:
    """The most bytes a reply to a request for ``max_tokens`` tokens may take."""
    return max_tokens * BYTES_PER_TOKEN + ENVELOPE_BYTES


class TooLarge(Exception):
    """A reply body past its limit."""


def read_limited(pieces: Iterable[bytes], limit: int) -> bytes:
    """The body arriving in ``pieces``, refused (``TooLarge``) as soon as it passes
    ``limit`` bytes, so that no more than that is ever held."""
    body = bytearray()
    for piece in pieces:
        if len(body) + len(piece) > limit:
            raise TooLarge
        body += piece
    return bytes(body)


def json_object(body: bytes, source: str) -> dict[str, Any]:
    """The JSON object ``body`` holds; ``source`` (``the server at URL answered PATH``)
    begins the error otherwise."""
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise KgragError(f"{source} with no JSON: is it an OpenAI-compatible API?") from None
    if not isinstance(reply, dict):
        raise KgragError(f"{source} with a JSON {_kind(reply)}, not an object: is it an "
                         "OpenAI-compatible API?")
    return reply


def completion_of(reply: dict[str, Any], chat: bool, source: str) -> Completion:
    """The completion in an OpenAI-style ``reply`` (``choices[0].message.content`` for a
    chat, ``choices[0].text`` else; a null text is an empty one), with its token counts
    (``usage``; absent ones are 0), once every field it reads has the right type."""
    choices = _field(reply, "choices", list, "a list", source)
    if not choices:
        raise _wrong(source, "choices", choices, "a list of at least one choice")
    if not isinstance(choices[0], dict):
        raise _wrong(source, "choices[0]", choices[0], "an object")
    if chat:
        message = _field(choices[0], "choices[0].message", dict, "an object", source)
        field = "choices[0].message.content"
        text = _field(message, field, (str, type(None)), "a string or null", source)
    else:
        field = "choices[0].text"
        text = _field(choices[0], field, (str, type(None)), "a string or null", source)
    text = text or ""
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate (\ud800): no file can store it
        raise _wrong(source, field, text, "text (it holds a lone UTF-16 surrogate)") from None
    usage = reply.get("usage")
    if usage is None:
        usage = {}
    elif not isinstance(usage, dict):
        raise _wrong(source, "usage", usage, "an object")
    tokens_in, tokens_out = (_count(usage, key, source)
                             for key in ("prompt_tokens", "completion_tokens"))
    return Completion(text=text, tokens_in=tokens_in, tokens_out=tokens_out, cached=False)


def model_names(listing: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """The models a ``GET /models`` reply lists, by their ``id``."""
    data = listing.get("data")
    if data is None:
        data = []
    elif not isinstance(data, list):
        raise _wrong(source, "data", data, "a list of models")
    return {str(m.get("id")): m for m in data if isinstance(m, dict)}


def _field(parent: dict[str, Any], field: str, kinds: type | tuple[type, ...],
           expected: str, source: str) -> Any:
    """The value of ``field`` (a path such as ``choices[0].text``, its last part a key
    of ``parent``), refused unless it is there and one of ``kinds``."""
    key = field.rsplit(".", 1)[-1]
    if key not in parent:
        raise KgragError(f"{source} with no {field}: is it an OpenAI-compatible API?")
    if not isinstance(parent[key], kinds):
        raise _wrong(source, field, parent[key], expected)
    return parent[key]


def _count(usage: dict[str, Any], key: str, source: str) -> int:
    """``usage[key]`` as a token count: a whole number from 0 to ``MAX_TOKEN_COUNT``."""
    value = usage.get(key, 0)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not (
            0 <= value <= MAX_TOKEN_COUNT):
        raise _wrong(source, f"usage.{key}", value, "a token count (a whole number from 0)")
    return value


def _kind(value: Any) -> str:
    """The JSON name of ``value``'s type."""
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def _wrong(source: str, field: str, value: Any, expected: str) -> KgragError:
    if isinstance(value, str):
        shown = f"the string {value[:40]!r}"
    elif isinstance(value, (bool, int, float)):
        shown = json.dumps(value)[:40] if not isinstance(value, float) else repr(value)
    else:
        shown = "null" if value is None else f"an {_kind(value)}"  # an array, an object
    return KgragError(f"{source} with {shown} as {field}, where {expected} belongs: is it "
                      "an OpenAI-compatible API?")
