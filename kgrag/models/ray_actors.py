"""The Ray side of the executor (``kgrag.models.executor``): pools of actors, each actor
holding one model (``ModelWorker``: an LLM backend) or one batch ``Work`` (``BatchWorker``:
spaCy's parses, the embedder's vectors), and the backend that sends a cached LLM's
misses to an idle actor (``RemoteBackend``).

A ``BatchWorker`` runs its work on the CPUs Ray gave it (``kgrag.host.grant_cores``):
the exported embedder's runtime threads and torch's intra-op threads, which would
otherwise count every core of the node (Ray's own ``OMP_NUM_THREADS`` is set only
where the environment has none, and reaches neither the OpenVINO nor the ONNX runtime).

A call on an actor raises what the model raised; a lost actor is one ``KgragError``
(LLM pools), or its batch goes to an actor again while Ray restarts the lost one, up
to ``LOSSES_ALLOWED`` times per pool (work pools).
"""

from __future__ import annotations

import math
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kgrag.errors import KgragError
from kgrag.host import grant_cores
from kgrag.models.backend import Completion, LLMBackend, LLMSettings
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.registry import file_sha256

Work = Callable[[list[Any]], list[Any]]  # a batch's outputs from its inputs
LOSSES_ALLOWED = 3  # worker processes lost in one map_work before it gives up
RESTART_TIMEOUT_S = 120.0  # for Ray to restart a lost worker (a process, its imports)


class RemoteBackend:
    """A backend whose calls go to an idle actor of the pool ``pool()`` returns."""

    def __init__(self, pool: Callable[[], ActorPool]) -> None:
        self.pool = pool

    def generate(self, request: dict[str, Any]) -> Completion:
        return self.pool().call("generate", request)

    def logprobs(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.pool().call("logprobs", requests)


class ActorPool:
    """``size`` Ray actors each holding one copy of a model; a call takes an idle one."""

    def __init__(self, ray: Any, settings: LLMSettings, backend: LLMBackend, size: int) -> None:
        self.ray = ray
        worker = ray.remote(num_cpus=1)(ModelWorker)
        self._idle: queue.Queue = queue.Queue()
        for _ in range(size):
            self._idle.put(worker.remote(settings, backend))

    def call(self, method: str, request: Any) -> Any:
        """The backend ``method`` (generate, logprobs) of an idle actor on ``request`` (a
        request dict, or logprobs' sequence of them)."""
        actor = self._idle.get()
        try:
            return self.ray.get(getattr(actor, method).remote(request))
        except self.ray.exceptions.RayTaskError as exc:  # raised by the backend: as itself
            raise exc.cause from None
        except self.ray.exceptions.RayError as exc:
            raise KgragError(f"a Ray worker was lost ({type(exc).__name__}: {exc}); run "
                             "again to resume: completed calls are cached") from None
        finally:
            self._idle.put(actor)

    def close(self) -> None:
        """Stop the actors (a later miss starts a new pool)."""
        while not self._idle.empty():
            self.ray.kill(self._idle.get())


@dataclass(frozen=True)
class Batch:
    """A batch a worker computed: on which node, of how many inputs, sent and back when
    (``time.monotonic()`` in this process, the last try's)."""

    node: str
    inputs: int
    sent: float
    back: float


class WorkPool:
    """``size`` Ray actors each holding a copy of one ``Work``; a batch takes an idle
    one. A batch whose worker process dies goes to an actor again (Ray restarts the
    lost one), ``LOSSES_ALLOWED`` times per pool."""

    def __init__(self, ray: Any, work: Work, size: int) -> None:
        self.ray = ray
        worker = ray.remote(num_cpus=1, max_restarts=LOSSES_ALLOWED)(BatchWorker)
        self.actors = [worker.remote(work) for _ in range(size)]
        self._idle: queue.Queue = queue.Queue()
        for actor in self.actors:
            self._idle.put(actor)
        self._counting = threading.Lock()
        self.batches: list[Batch] = []  # each batch computed, in the order they came back
        self.lost = 0

    def compute(self, inputs: list[Any]) -> list[Any]:
        """``work(inputs)``, on an idle actor."""
        while True:
            actor = self._idle.get()
            sent = time.monotonic()
            try:
                node, outputs = self.ray.get(actor.compute.remote(inputs))
            except self.ray.exceptions.RayTaskError as exc:  # raised by the work: as itself
                raise exc.cause from None
            except self.ray.exceptions.RayError as exc:
                with self._counting:
                    self.lost += 1
                    if self.lost > LOSSES_ALLOWED:
                        raise KgragError(
                            f"lost {self.lost} Ray worker processes in one step (the last: "
                            f"{type(exc).__name__}); run again to resume: the batches done "
                            "are cached") from None
                self._restarted(actor)
                continue
            finally:
                self._idle.put(actor)
            batch = Batch(node, len(inputs), sent, time.monotonic())
            with self._counting:
                self.batches.append(batch)
            return outputs

    def _restarted(self, actor: Any) -> None:
        """Wait while Ray restarts a lost actor (a call meanwhile would fail, and count
        as another loss); one dead for good fails its next call at once."""
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                self.ray.get(actor.__ray_ready__.remote())
                return
            except self.ray.exceptions.ActorUnavailableError:
                time.sleep(0.2)
            except self.ray.exceptions.RayError:
                return

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)


class BatchWorker:
    """A Ray actor's body: one ``Work`` (its model loaded on the first batch), run on as
    many threads as the actor has CPUs."""

    def __init__(self, work: Work) -> None:
        import ray

        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
        grant_cores(math.floor(cpus))
        self.work = work

    def compute(self, inputs: list[Any]) -> tuple[str, list[Any]]:
        """Where it ran (the node's id) and ``work(inputs)``."""
        import ray

        return ray.get_runtime_context().get_node_id(), self.work(inputs)


class ModelWorker:
    """A Ray actor's body: one backend (one model), loaded on its first call."""

    def __init__(self, settings: LLMSettings, backend: LLMBackend) -> None:
        self.settings, self.backend = settings, backend
        self._verified = not isinstance(backend, LlamaCppBackend)

    def generate(self, request: dict[str, Any]) -> Completion:
        self._verify()
        return self.backend.generate(request)

    def logprobs(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._verify()
        return self.backend.logprobs(requests)

    def _verify(self) -> None:
        if not self._verified:  # a node's model file must be the one the cache keys name
            s = self.settings
            found = file_sha256(s.path) if s.path.is_file() else "no such file"
            if found != s.sha256:
                raise KgragError(f"the Ray worker on {socket.gethostname()} has another "
                                 f"{s.path} ({found}, not {s.sha256}); every node needs the "
                                 "same model files at the same paths")
            self._verified = True
