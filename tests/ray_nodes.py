"""A Ray cluster of one-CPU nodes on this machine, started as a user starts one (``ray
start --head``, then ``ray start --address``), for the tests and benchmarks that need
real nodes.

Each node is a ``ray start … --block`` in a process group of its own, so that stopping
the cluster stops its processes and no other (``ray stop`` would stop every Ray
instance of the machine's user). Ray's session files go to a short temporary folder
(its socket paths have a length cap).

``DyingParser`` and ``ThreadsSeen`` are here too: the workers unpickle them, so they must
live in a module they import by this name (a test module is imported by pytest under
another).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kgrag.graphs.extraction.nlp import Parser
from kgrag.host import usable_cores
from kgrag.models.embed.embedder import Encoding
from kgrag.models.pipelines import ResolvedPipeline

RAY = Path(sys.executable).with_name("ray")
REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(*args: str, log: Path) -> subprocess.Popen:
    """``ray start … --block`` of one CPU, in a new process group; its workers import this
    checkout."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled"}  # whatever token a user's ~/.ray holds
    with log.open("w") as out:
        return subprocess.Popen([str(RAY), "start", *args, "--num-cpus", "1", "--block",
                                 "--disable-usage-stats"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _stop(node: subprocess.Popen) -> None:
    """The node's process group: SIGTERM (the launcher stops its processes), then
    SIGKILL for whatever outlived it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(node.pid, sig)
            node.wait(15)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(node.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait(ready, log: Path, deadline: float) -> None:
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"a Ray node did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def ray_nodes(count: int) -> Iterator[str]:
    """A head and ``count - 1`` more nodes of one CPU each on 127.0.0.1, this process
    connected to them; their address. Stopped, and disconnected, at the end, also when
    this process is told to stop (SIGTERM, as ``timeout`` sends it)."""
    import ray

    before = signal.signal(signal.SIGTERM, _terminated)
    port = free_port()
    temp = Path(tempfile.mkdtemp(prefix="kgrag-ray-", dir="/tmp"))
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    nodes = [_start("--head", "--port", str(port), "--temp-dir", str(temp),
                    "--include-dashboard", "false", log=temp / "node0.log")]
    try:
        _wait(lambda: _answers(port), temp / "node0.log", deadline)
        nodes += [_start("--address", address, log=temp / f"node{k}.log")
                  for k in range(1, count)]
        ray.init(address=address, log_to_driver=False)
        _wait(lambda: ray.cluster_resources().get("CPU", 0) >= count,
              temp / f"node{count - 1}.log", deadline)
        yield address
    finally:
        ray.shutdown()
        for node in reversed(nodes):
            _stop(node)
        shutil.rmtree(temp, ignore_errors=True)
        signal.signal(signal.SIGTERM, before)


class DyingParser(Parser):
    """The parser, whose worker process dies (SIGKILL) the first time it is handed the
    batch that holds ``doomed``; it logs each batch it begins, by its first text."""

    def __init__(self, pipeline: ResolvedPipeline, doomed: str, folder: Path) -> None:
        super().__init__(pipeline)
        self.doomed, self.folder = doomed, folder

    def __call__(self, chunks: list[tuple[str, str | None]]) -> list[dict]:
        with (self.folder / "begun").open("a") as log:
            log.write(json.dumps(chunks[0][0]) + "\n")
        died = self.folder / "died"
        if any(text == self.doomed for text, _ in chunks) and not died.exists():
            died.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(chunks)


class ThreadsSeen(Encoding):
    """The embedding work, which returns, for a batch's vectors, the threads it ran them
    on: torch's intra-op threads and the cores an exported model's runtime would take."""

    def __call__(self, texts: list[str]) -> list[dict]:
        import torch

        super().__call__(texts)
        return [{"torch": torch.get_num_threads(), "runtime": usable_cores()}]
