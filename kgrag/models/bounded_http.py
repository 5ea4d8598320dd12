"""HTTP requests whose whole exchange ends by a deadline (the model server backend's).

Why: httpx's timeouts bound each network operation, not a request. A server that sends
one byte every 2 s never trips a 20 s read timeout, whether it drips its reply's body or
its headers. Here every connect, write and read a request makes is given only the time
left until the deadline that ``deadline`` sets for the calling thread, and one that
would start after it fails as a timeout, so ``timeout_s`` bounds a request as a whole.

The clamp sits in the network layer under httpx (an httpcore network backend), the one
place every read of headers and body goes through; httpx's own transport has no way
to take one, so ``BoundedTransport`` hands httpx's requests to an httpcore pool that
uses it. Proxies from the environment are not used: the server is named by the spec.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_deadlines = threading.local()  # .at: the calling thread's deadline (time.monotonic())


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """The network operations this thread starts within the block end ``seconds`` from
    now at the latest."""
    _deadlines.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _deadlines.at = None


def _left(timeout: float | None, late: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the thread's deadline (``late`` raised
    when none is left)."""
    at = getattr(_deadlines, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise late("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._stream.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _BoundedBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each connection made and used within the deadline."""

    def __init__(self) -> None:
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._sockets.connect_tcp(
            host, port, _left(timeout, httpcore.ConnectTimeout), local_address,
            socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        return _BoundedStream(self._sockets.connect_unix_socket(
            path, _left(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)


@contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's failures as the httpx ones its callers catch: httpx has a class of
    the same name for each (``httpx.ReadTimeout`` for ``httpcore.ReadTimeout``...)."""
    try:
        yield
    except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
            httpcore.UnsupportedProtocol, httpcore.ProxyError) as exc:
        raise getattr(httpx, type(exc).__name__)(str(exc)) from exc


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self._stream

    def close(self) -> None:
        self._stream.close()


class BoundedTransport(httpx.BaseTransport):
    """httpx's requests sent over connections that end by the thread's ``deadline``;
    ``connections`` at most at once."""

    def __init__(self, connections: int) -> None:
        self._pool = httpcore.ConnectionPool(max_connections=connections,
                                             network_backend=_BoundedBackend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        sent = httpcore.Request(
            request.method,
            httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port,
                         target=url.raw_path),
            headers=request.headers.raw, content=request.stream,
            extensions=request.extensions)
        with _as_httpx():
            reply = self._pool.handle_request(sent)
        return httpx.Response(reply.status, headers=reply.headers, stream=_Body(reply.stream),
                              extensions=reply.extensions)

    def close(self) -> None:
        self._pool.close()
