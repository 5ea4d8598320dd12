"""Servers on 127.0.0.1 that the served backend's tests and benchmarks run against:
llama-cpp-python's OpenAI-compatible server for one GGUF (``LocalServer``), and a fake
one that answers whatever a test scripts, broken replies included (``FakeServer``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """The server, started and answering ``/v1/models`` when the constructor returns,
    up until ``stop``; ``threads`` None leaves llama.cpp's own choice."""

    def __init__(self, model: Path, n_ctx: int, threads: int | None = None,
                 timeout_s: float = 300) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/v1"
        threading = [] if threads is None else ["--n_threads", str(threads),
                                                "--n_threads_batch", str(threads)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
             "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), *threading,
             "--verbose", "false"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                httpx.get(f"{self.url}/models", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the llama-cpp-python server for {model.name} did "
                                       f"not start (exit code {self.process.returncode})"
                                       ) from None
                time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Nothing printed: a client hanging up mid-reply is what the tests provoke."""


@dataclass
class Reply:
    """What the fake server sends: ``status``, then ``head`` (the raw status line and
    headers; made from the status and ``length`` when empty), then the ``body``
    pieces, ``pause_s`` apart (the head's bytes too, with ``drip_head``). ``length`` False sends no Content-Length: the body ends
    when the connection closes."""

    body: Iterable[bytes] = ()
    status: int = 200
    pause_s: float = 0.0
    length: bool = True
    head: bytes = b""
    drip_head: bool = False  # the status line and headers too, a byte per pause


def completion(text: Any = "Paris", usage: Any = None, chat: bool = False) -> bytes:
    """A well-formed reply to ``/completions`` (``/chat/completions`` with ``chat``),
    its fields replaceable by broken ones."""
    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
    usage = {"prompt_tokens": 5, "completion_tokens": 1} if usage is None else usage
    return json.dumps({"id": "x", "object": "text_completion", "model": "fake",
                       "choices": [{"index": 0, "finish_reason": "stop", **choice}],
                       "usage": usage}).encode()


class FakeServer:
    """An OpenAI-style server in a thread: ``GET /v1/models`` lists ``model`` (or sends
    ``listing``), every POST is answered by ``answer(path, request)``; each request is
    recorded in ``requests``. Stopped by ``stop`` (or leaving its ``with`` block), and
    by itself after ``lifetime_s``, so a test that forgets it leaves nothing running."""

    def __init__(self, answer: Callable[[str, dict[str, Any]], Reply], model: str = "fake",
                 listing: bytes | None = None, lifetime_s: float = 120.0) -> None:
        self.answer, self.model, self.listing = answer, model, listing
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.sent = 0  # body bytes written, all replies together
        self.stopping = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self.stopping.is_set():
            self.stopping.set()
            self._timer.cancel()
            self._server.shutdown()
            self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10  # a client that stops sending frees the thread

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                listing = fake.listing if fake.listing is not None else json.dumps(
                    {"object": "list", "data": [{"id": fake.model, "object": "model"}]}
                ).encode()
                self._send(Reply([listing]))

            def do_POST(self) -> None:
                fake.requests.append(("POST", self.path))
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(fake.answer(self.path.removeprefix("/v1"), request))

            def _send(self, reply: Reply) -> None:
                pieces = list(reply.body) if reply.length else reply.body
                head = reply.head or (
                    f"HTTP/1.1 {reply.status} X\r\nContent-Type: application/json\r\n"
                    + (f"Content-Length: {sum(map(len, pieces))}\r\n" if reply.length
                       else "Connection: close\r\n") + "\r\n").encode()
                self.close_connection = not reply.length
                dripped = [head[i:i + 1] for i in range(len(head))] if reply.drip_head else []
                try:
                    for part in dripped or [head]:
                        self._write(part, reply.pause_s if dripped else 0)
                    for piece in pieces:
                        self._write(piece, reply.pause_s)
                        fake.sent += len(piece)
                except OSError:  # the client hung up: what a refused reply does
                    self.close_connection = True

            def _write(self, part: bytes, pause_s: float) -> None:
                if fake.stopping.is_set():
                    raise ConnectionAbortedError("the fake server is stopping")
                self.wfile.write(part)
                self.wfile.flush()
                time.sleep(pause_s)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
