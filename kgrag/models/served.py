"""An LLM behind a local model server that speaks the OpenAI HTTP API (llama.cpp's
``llama-server``, llama-cpp-python's server, vLLM, Ollama, LM Studio).

Why a server at all: a model of 7-70B parameters on a GPU is run behind a server,
which batches concurrent requests; kgrag then sends work items concurrently
(``concurrency``) instead of one call at a time.

The cache contract is the in-process one. A served model's identity is the one the
spec declares (``identity: sha256:<the GGUF's sha256>``, or another scheme such as a
Hugging Face repository at a revision), and it stands in the cache keys and the
fingerprints where a GGUF's sha256 stands for an in-process model. The server itself
is contacted only on a cache miss, so a replay (a sealed cache) never needs it. On the
first miss kgrag checks that the server serves the named model and, where the server
names the model's file on this machine (llama.cpp's servers do), that the file's
sha256 is the declared identity: a server that contradicts it is refused, since its
outputs would be cached under another model's name.

Prompts go only to this machine or a private network: a URL whose host is a public
address (or a name that resolves to one) is refused unless the spec sets
``allow_remote``. A request's ``timeout_s`` bounds it whole, headers and body
(``kgrag.models.bounded_http``); requests are retried with back-off while the server is
unreachable, busy or out of time, and end in one ``KgragError`` that says what to do.
A reply is read up to what ``max_tokens`` can take and checked field by field before
``CachedLLM`` caches it (``kgrag.models.server_reply``): a broken server is an error
now, never a cached answer that later runs replay.

Log-probability scoring (ARK) is refused before the step that scores starts
(``no_scoring``). Constraints use the standard request fields. A JSON-schema output is asked for with
``response_format`` (``json_schema``) and, for the llama.cpp servers, the same schema
as a GBNF ``grammar``; a server that rejects the standard field (llama-cpp-python's
chat endpoint) gets the grammar alone from then on. Validation and retries are
``CachedLLM``'s, as in-process.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kgrag.errors import KgragError
from kgrag.models.addresses import host_of, is_local_host, refuse_public
from kgrag.models.backend import FIXED_SAMPLING, Completion
from kgrag.models.registry import ResolvedModel, file_sha256, resolve_llm
from kgrag.models.server_reply import (
    LISTING_BYTES,
    TooLarge,
    completion_of,
    json_object,
    model_names,
    read_limited,
    reply_limit,
)

CONNECT_TIMEOUT_S = 5.0
ATTEMPTS = 4  # per request, while the server is unreachable or answers "busy"
BACKOFF_S = 1.0  # doubled after each failed attempt
BUSY = {429, 502, 503, 504}  # statuses a loading or overloaded server answers
ERROR_BYTES = 64 * 1024  # what is read of an error's body (its message)
CONSTRAINTS = ("response_format", "grammar", "guided_grammar")  # kept while another stays
SERVED_DEFAULTS = {"identity": None, "concurrency": 1, "timeout_s": 600.0,
                   "allow_remote": False}


@dataclass(frozen=True)
class ServedModel(ResolvedModel):
    """A model a server serves: ``name`` is the server's name for it, ``sha256`` the
    declared identity, ``path`` empty (no file here)."""

    url: str = ""
    concurrency: int = 1
    timeout_s: float = 600.0
    allow_remote: bool = False


def resolve_llm_entry(entry: str | Mapping[str, Any], base_dir: Path | None, where: str
                      ) -> ResolvedModel:
    """The LLM a spec entry names: a bundled name or .gguf path, or a served model
    (``{server, model, identity, ...}``: ``models.llm`` with ``server`` set, or the same
    object as ``extraction.model``). Resolving contacts no server."""
    if isinstance(entry, str):
        return resolve_llm(entry, base_dir)
    if entry.get("server") is None:
        return resolve_llm(entry["model"], base_dir)
    return served_model({**SERVED_DEFAULTS, **entry}, where)


def served_model(entry: Mapping[str, Any], where: str) -> ServedModel:
    """A ``ServedModel`` from a spec entry, its URL and identity checked (no request)."""
    url = str(entry["server"]).rstrip("/")
    host = host_of(url, where)
    identity = entry["identity"]
    if identity is None:
        raise KgragError(
            f"{where}.server is set but {where}.identity is not: kgrag keys its call cache "
            "and the fingerprints of what the model builds by the model's identity, and "
            "cannot read it from a server. Declare the weights the server runs, e.g. "
            f"`identity: sha256:<sha256sum of the GGUF file>` (docs/model-server.md)")
    scheme, _, rest = identity.partition(":")
    if not rest or (scheme == "sha256" and not _is_hex64(rest)):
        raise KgragError(f"{where}.identity {identity!r} is not an identity: write "
                         "sha256:<64 hex digits of the model file> or scheme:name "
                         "(e.g. hf:org/model@revision)")
    if not entry["allow_remote"]:
        refuse_public(host, url, where, resolve=False)
    return ServedModel(name=str(entry["model"]), kind="llm", path=Path(), sha256=identity,
                       bundled=False, url=url, concurrency=int(entry["concurrency"]),
                       timeout_s=float(entry["timeout_s"]),
                       allow_remote=bool(entry["allow_remote"]))


def _is_hex64(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def model_file(model: ResolvedModel, why: str) -> Path:
    """The GGUF file of ``model``, for work that reads its weights (``why``): refused for
    a served model, whose weights are the server's."""
    if isinstance(model, ServedModel):
        raise KgragError(f"{why} reads the weights of models.llm, and {model.name!r} is "
                         f"served at {model.url}: name its GGUF file in models.llm instead")
    return model.path


def no_scoring(model: ServedModel, where: str) -> KgragError:
    """Why a served model cannot score (ARK's alignment scores need the log-probability
    of each prompt token given the ones before it). llama.cpp's servers echo prompt
    log-probabilities shifted by one position (each token scored by the distribution
    that follows it), and vLLM's ``prompt_logprobs`` is not read yet."""
    return KgragError(
        f"{where} is the model served at {model.url}, and log-probability scoring (ARK's "
        "alignment scores) cannot go through a server: the prompt log-probabilities that "
        "llama.cpp's servers echo are shifted by one token. Let an in-process GGUF score "
        "(models.llm: a .gguf path, without server; docs/model-server.md)")


class ServerBackend:
    """Cache misses computed by a model server (``LLMBackend``); thread-safe, so an
    executor's ``concurrency`` threads share one connection pool."""

    def __init__(self, model: ServedModel, where: str = "models.llm") -> None:
        self.model, self.where = model, where
        self._client: Any = None
        self._ready = threading.Lock()
        self._refused_fields: set[str] = set()  # constraint fields the server rejected

    def __reduce__(self) -> tuple[type, tuple[ServedModel, str]]:
        """Pickled as its recipe, never its connections (a Ray worker connects itself)."""
        return ServerBackend, (self.model, self.where)

    def generate(self, request: dict[str, Any]) -> Completion:
        chat = "messages" in request
        body: dict[str, Any] = {
            "model": self.model.name, "max_tokens": request["max_tokens"],
            "temperature": request["temperature"], "top_p": request["top_p"],
            "seed": request["seed"], "stop": request["stop"] or None, "n": 1,
            **{k: request[k] for k in FIXED_SAMPLING}}
        body |= {"messages": request["messages"]} if chat else {"prompt": request["prompt"]}
        if request.get("json_schema") is not None:
            body["grammar"] = _gbnf(request["json_schema"])
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request["json_schema"],
                                "strict": True}}
        elif request.get("grammar") is not None:
            body |= {"grammar": request["grammar"], "guided_grammar": request["grammar"]}
        path = "/chat/completions" if chat else "/completions"
        reply = self._constrained(path, body, reply_limit(request["max_tokens"]))
        # checked before CachedLLM caches it: a reply of the wrong shape is an error now,
        # never an answer that every later run replays
        return completion_of(reply, chat, self._answered(path))

    def _constrained(self, path: str, body: dict[str, Any], limit: int) -> dict[str, Any]:
        """``body`` posted to ``path`` (a reply of ``limit`` bytes at most). Its
        constraint is in two fields where both apply (``response_format`` and
        ``grammar``); a server that rejects one of them, naming it, gets the other
        alone, from then on."""
        while True:
            sent = {k: v for k, v in body.items() if k not in self._refused_fields}
            try:
                return self._send(self._connected(), "POST", path, sent, limit)
            except _Rejected as exc:
                named = [f for f in CONSTRAINTS if f in sent and re.search(rf"\b{f}\b", exc.text)]
                if not named or all(f in named for f in CONSTRAINTS if f in sent):
                    raise self._refused(path, exc) from None
                self._refused_fields.update(named)

    def logprobs(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Refused (``no_scoring``): no server kgrag can check returns teacher-forced
        log-probabilities of a prompt."""
        raise no_scoring(self.model, self.where)

    def _refused(self, path: str, exc: _Rejected) -> KgragError:
        return KgragError(f"the server at {self.model.url} refused a request to {path} "
                          f"(HTTP {exc.status}: {exc.text[:400]})")

    def _connected(self) -> Any:
        """The HTTP client, made on the first call after checking the server: it serves
        ``model.name`` and, where it names that model's file here, with the declared
        identity."""
        with self._ready:
            if self._client is None:
                import httpx

                from kgrag.models.bounded_http import BoundedTransport

                host = urlsplit(self.model.url).hostname or ""
                if not self.model.allow_remote:
                    refuse_public(host, self.model.url, self.where, resolve=True)
                client = httpx.Client(
                    transport=BoundedTransport(max(1, self.model.concurrency)),
                    timeout=httpx.Timeout(self.model.timeout_s, connect=CONNECT_TIMEOUT_S),
                    follow_redirects=False)
                self._check(self._send(client, "GET", "/models", None, LISTING_BYTES))
                self._client = client
            return self._client

    def _check(self, listing: dict[str, Any]) -> None:
        served = model_names(listing, self._answered("/models"))
        entry = served.get(self.model.name)
        if entry is None:
            raise KgragError(
                f"the server at {self.model.url} does not serve {self.model.name!r}; it "
                f"serves {', '.join(map(repr, served)) or 'no model'}: set {self.where}.model "
                "to one of those (the server's name for it)")
        scheme, _, declared = self.model.sha256.partition(":")
        local = is_local_host(urlsplit(self.model.url).hostname or "")
        for named in (entry.get("id"), entry.get("root")):
            file = Path(str(named)) if named else None
            if scheme != "sha256" or not local or file is None or not _is_gguf(file):
                continue
            found = file_sha256(file)
            if found != declared:
                raise KgragError(
                    f"the server at {self.model.url} serves {self.model.name!r} from {file}, "
                    f"whose sha256 is {found}, not the declared {self.where}.identity "
                    f"sha256:{declared}; its outputs would be cached under another model. "
                    f"Serve the declared model, or declare identity: sha256:{found}")

    def _answered(self, path: str) -> str:
        """How an error about the reply to ``path`` begins."""
        return f"the server at {self.model.url} answered {path}"

    def _send(self, client: Any, method: str, path: str, body: dict[str, Any] | None,
              limit: int) -> dict[str, Any]:
        """One request, retried with back-off while the server is unreachable, gives no
        whole reply within ``timeout_s`` or answers busy; a JSON object of ``limit``
        bytes at most back, or ``_Rejected`` (any other HTTP error)."""
        import httpx

        why = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                status, answer = self._exchange(client, method, path, body, limit)
            except httpx.TimeoutException:
                why = f"no whole reply within {self.model.timeout_s:g} s"
                continue
            except httpx.TransportError as exc:
                why = f"{type(exc).__name__}: {exc}"
                continue
            except TooLarge:
                raise KgragError(
                    f"{self._answered(path)} with more than {limit:,} bytes, more than a "
                    "reply to this request can take: refused unread (is it an "
                    "OpenAI-compatible API?)") from None
            text = answer.decode("utf-8", "replace")
            if status in BUSY:
                why = f"HTTP {status}: {text[:200]}"
                continue
            if not 200 <= status < 300:
                raise _Rejected(status, text)
            return json_object(answer, self._answered(path))
        raise KgragError(
            f"the model server at {self.model.url} does not answer ({why}; {ATTEMPTS} "
            f"attempts): start it, or fix {self.where}.server; completed calls are cached, "
            "so a new run resumes where this one stopped")

    def _exchange(self, client: Any, method: str, path: str, body: dict[str, Any] | None,
                  limit: int) -> tuple[int, bytes]:
        """The status and body of one request, all of it within ``timeout_s``: a body
        read a piece at a time, refused past ``limit`` bytes (``TooLarge``); an error's
        only up to ``ERROR_BYTES``, what its message needs."""
        from kgrag.models.bounded_http import deadline

        with deadline(self.model.timeout_s), client.stream(
                method, self.model.url + path, json=body,
                headers={"Accept-Encoding": "identity"}) as response:
            if response.is_success:
                return response.status_code, read_limited(response.iter_raw(), limit)
            head = b""
            for piece in response.iter_raw():
                head += piece
                if len(head) >= ERROR_BYTES:
                    break
            return response.status_code, head[:ERROR_BYTES]


class _Rejected(Exception):
    """An HTTP error the server answered (not a busy one): a request it will not serve."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.text = status, text


def _is_gguf(path: Path) -> bool:
    try:
        return path.suffix.lower() == ".gguf" and path.is_file()
    except OSError:
        return False


def _gbnf(schema: dict[str, Any]) -> str:
    """``schema`` as the GBNF grammar llama.cpp derives from it (what an in-process call
    constrains with), for servers that take a ``grammar``."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema))
