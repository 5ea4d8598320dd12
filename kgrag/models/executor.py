"""Where the model calls of a step's work items run: in this process, one item after
another (``local``, the default), or on Ray workers, several items at a time (``ray``).

The contract, for a step that makes a few model calls per work item (extraction, the
hybrid relation calls, module summaries, gate checks; ARK's scoring next):

``executor.map(llm, task, items, progress)`` returns ``[task(llm_i, item) for item in
items]``, in item order, where every ``llm_i`` has ``llm``'s settings, call cache and
usage counters; only where a call the cache cannot answer is computed differs.

* ``task`` runs in this process. It reads its item and whatever it closes over and
  changes nothing they share (the Ray executor runs several tasks at once, on threads);
  all it produces is its return value. An exception from a task ends the map and is
  raised from it.
* Every call goes through ``llm``'s cache under the key a local run uses, and this
  process stores what a worker computed. So the outputs are a local run's, the
  runner's ``recording()`` sees every key a step used (what bundles ship), usage is
  counted as usual, and a later local run replays a Ray run's calls.
* The executor is part of no fingerprint and no cache key: it changes where calls
  run, never what they return.
* ``progress`` wraps the results as they come in (a bar, or a line in a log).

The same contract holds for work that calls no LLM (spaCy's parses, the embedder's
vectors): ``executor.map_work(work, task, items, progress)`` returns ``[task(work_i,
item) for item in items]``, where ``work`` computes a batch's outputs from its inputs
(``work(inputs) -> outputs``: picklable, loading its model on its first call) and every
``work_i`` computes what ``work`` computes. ``task`` looks its item's keys up in the
call cache, hands only the misses to ``work_i`` and stores what comes back, before the
next item; so a batch, once returned, is paid for once, whatever happens after.

``ray`` runs up to ``workers`` tasks at a time on threads of this process. Each call
that misses the cache goes to an idle Ray actor of that model, ``workers`` of them per
model, each loading the model once, on its first call. Which actor computes a call does
not change its output: an output is a function of its request (``kgrag.models.llamacpp``,
``PROMPT_BLOCK``). Ray is contacted when a step first maps (so a run whose steps are
all reused never starts it), from the calling thread: a local instance's processes
die with the thread that started them. An address that does not answer is one
``KgragError`` within ``CONNECT_TIMEOUT_S``; completed artefacts and calls are kept
as always. The actors start at a model's first cache miss.

``map_work`` on ``ray`` starts ``workers`` actors holding a copy of ``work`` each (each
loads its model once, and runs it on as many threads as Ray gave it CPUs), for the
length of the map, and sends each item's misses to an idle one. Before that it stops the
LLM actors: an actor holds a CPU, and the next step's actors would otherwise wait for
one forever (the LLM actors start again at the next miss). A worker process that dies
mid-batch is restarted by Ray and its batch sent again, up to ``LOSSES_ALLOWED`` times
per map (``kgrag.models.ray_actors``); past that the map ends with one ``KgragError``,
and a rerun resumes from the batches the cache holds.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol, TypeVar

from kgrag.errors import KgragError
from kgrag.models.llm import CachedLLM
from kgrag.models.ray_actors import ActorPool, Batch, RemoteBackend, Work, WorkPool

T = TypeVar("T")
R = TypeVar("R")
Task = Callable[[CachedLLM, T], R]
WorkTask = Callable[[Work, T], R]
Watch = Callable[[Iterable[Any]], Iterable[Any]]

PROBE_TIMEOUT_S = 5.0  # for the address's port to accept a connection at all
CONNECT_TIMEOUT_S = 60.0  # for ray.init to join the cluster behind it


def unwatched(results: Iterable[R]) -> Iterable[R]:
    return results


class Executor(Protocol):
    def map(self, llm: CachedLLM, task: Task[T, R], items: Sequence[T],
            progress: Watch = unwatched) -> list[R]:
        """``task(llm, item)`` for every item, in item order (see the module docstring)."""

    def map_work(self, work: Work, task: WorkTask[T, R], items: Sequence[T],
                 progress: Watch = unwatched) -> list[R]:
        """``task(work, item)`` for every item, in item order (see the module docstring)."""


class LocalExecutor:
    """Today's loop: one task after another, in this process."""

    def map(self, llm: CachedLLM, task: Task[T, R], items: Sequence[T],
            progress: Watch = unwatched) -> list[R]:
        return list(progress(task(llm, item) for item in items))

    def map_work(self, work: Work, task: WorkTask[T, R], items: Sequence[T],
                 progress: Watch = unwatched) -> list[R]:
        results: list[R] = []

        def each() -> Iterator[R]:
            for item in items:
                results.append(task(work, item))
                yield results[-1]

        for _ in progress(each()):
            pass
        return results


class ThreadedExecutor:
    """``workers`` tasks at a time on threads of this process: for a model server, which
    batches the requests that arrive together. Results stay in item order, and every
    output is a function of its request (the cache key), so completion order changes
    nothing."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def map(self, llm: CachedLLM, task: Task[T, R], items: Sequence[T],
            progress: Watch = unwatched) -> list[R]:
        return _threaded(self.workers, llm, task, items, progress)

    def map_work(self, work: Work, task: WorkTask[T, R], items: Sequence[T],
                 progress: Watch = unwatched) -> list[R]:
        """In this process: the threads are for a model server's requests."""
        return LocalExecutor().map_work(work, task, items, progress)


class RayExecutor:
    """``workers`` tasks at a time; their cache misses computed by Ray actors.

    ``batches`` lists every batch ``map_work`` had computed (its node, size, and when it
    was sent and came back), in the order they came back, ``placements`` their nodes,
    and ``lost`` the worker processes lost meanwhile: what a benchmark or a test reads
    to see where and when the work ran."""

    def __init__(self, address: str | None, workers: int) -> None:
        self.address, self.workers = address, workers
        self._pools: dict[str, ActorPool] = {}  # by model sha256
        self._lock = threading.Lock()
        self.batches: list[Batch] = []
        self.lost = 0

    def map(self, llm: CachedLLM, task: Task[T, R], items: Sequence[T],
            progress: Watch = unwatched) -> list[R]:
        ray = _connected(self.address, self.workers)
        remote = llm.computing_with(RemoteBackend(functools.partial(self._pool, ray, llm)))
        return _threaded(self.workers, remote, task, items, progress)

    def map_work(self, work: Work, task: WorkTask[T, R], items: Sequence[T],
                 progress: Watch = unwatched) -> list[R]:
        ray = _connected(self.address, self.workers)
        with self._lock:  # their CPUs, for this map's actors
            for llm_pool in self._pools.values():
                llm_pool.close()
            self._pools.clear()
        pool = WorkPool(ray, work, self.workers)
        try:
            return _threaded(self.workers, pool.compute, task, items, progress)
        finally:
            pool.close()
            self.batches += pool.batches
            self.lost += pool.lost

    @property
    def placements(self) -> list[str]:
        return [batch.node for batch in self.batches]

    def _pool(self, ray: Any, llm: CachedLLM) -> ActorPool:
        """The actors of ``llm``'s model, started on first use."""
        with self._lock:
            if llm.settings.sha256 not in self._pools:
                self._pools[llm.settings.sha256] = ActorPool(ray, llm.settings, llm.backend,
                                                             self.workers)
            return self._pools[llm.settings.sha256]


def _threaded(workers: int, computes: Any, task: Callable[[Any, T], R], items: Sequence[T],
              progress: Watch) -> list[R]:
    """``task(computes, item)`` for every item, ``workers`` at a time, results in item
    order; the first failure cancels what has not started and is raised (the tasks
    running then finish, and what they computed is stored)."""
    with ThreadPoolExecutor(workers, thread_name_prefix="kgrag-calls") as threads:
        futures = [threads.submit(task, computes, item) for item in items]
        try:
            for _ in progress(_as_completed(futures)):
                pass
        finally:
            for future in futures:
                future.cancel()
    return [future.result() for future in futures]


def _as_completed(futures: list[Future]) -> Iterator[Any]:
    """Each future's result as it finishes; the first failure is raised at once."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            yield future.result()


def _connected(address: str | None, workers: int) -> Any:
    """The ``ray`` module, connected: to ``address``, or to a local instance it starts
    with ``workers`` CPUs. A program that already called ``ray.init`` keeps its
    connection. Refuses a cluster with fewer CPUs than ``workers`` (one actor each):
    the actors left over would wait for a CPU forever."""
    try:
        import ray
    except ImportError:
        raise KgragError("executor kind ray needs Ray: pip install 'kgrag[ray]'") from None
    if not ray.is_initialized():
        _join(ray, address, workers)
    cpus = ray.cluster_resources().get("CPU", 0)
    if cpus < workers:
        raise KgragError(f"the Ray cluster has {cpus:g} CPUs, fewer than executor.workers "
                         f"({workers}); lower workers or add nodes")
    return ray


def _join(ray: Any, address: str | None, workers: int) -> None:
    """Start a local instance of ``workers`` CPUs (``address`` None), or join the
    cluster at ``address`` within ``CONNECT_TIMEOUT_S``, after a quick look at it."""
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address is None:  # "local": a new instance even where another one runs
        ray.init(address="local", num_cpus=workers, include_dashboard=False, **quiet)
        return
    _probe(address)
    failure: list[BaseException] = []

    def init() -> None:  # starts no process here, so it may run on a passing thread
        try:
            ray.init(address=address, **quiet)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failure.append(exc)

    joining = threading.Thread(target=init, daemon=True)
    joining.start()
    joining.join(CONNECT_TIMEOUT_S)
    if joining.is_alive():
        raise KgragError(f"no Ray cluster answered at {address} within "
                         f"{CONNECT_TIMEOUT_S:.0f} s; {_ADVICE}")
    if failure:
        raise KgragError(f"cannot connect to Ray at {address}: {failure[0]}; {_ADVICE}")


_ADVICE = ("check executor.address (a head node's host:6379, ray://host:10001 through Ray "
           "Client) or drop the executor section to run in this process")


def _probe(address: str) -> None:
    """Fail fast when nothing accepts connections at ``address``'s host and port (Ray
    itself retries an unreachable address for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not port.isdigit():
        return  # "auto", or a name Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise KgragError(f"the Ray address {address} does not answer "
                         f"({exc.strerror or exc}); {_ADVICE}") from None


def executor_of(config: Mapping[str, Any]) -> Executor:
    """The executor a spec's ``executor`` section names."""
    if config["kind"] == "ray":
        return RayExecutor(config["address"], config["workers"])
    return LocalExecutor()
