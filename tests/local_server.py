"""llama-cpp-python's OpenAI-compatible server on 127.0.0.1 for one GGUF: what the served
backend's tests and ``benchmarks/server_throughput.py`` run against."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

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
