"""The machine a run shares: the cores this process may use, the share of them other
processes leave free, and this process's peak memory.

llama.cpp's and torch's threads spin-wait for each other, so a thread without a core of
its own stalls the rest (``CpuShare``); the runner records each step's peak memory
(``PeakRSS``) and the manifest the usable cores. Nothing here imports the rest of kgrag.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Self

import psutil

# Cores that others keep this busy still count as free: background noise must not halve
# llama.cpp's threads, while a test suite or a second run (a whole core) must.
FREE_CORE_SLACK = 0.25


# The cores a scheduler granted this process (a Ray actor's CPUs), where one did.
_granted: int | None = None


def grant_cores(cores: int) -> None:
    """Hold ``usable_cores()`` to the ``cores`` a scheduler gave this process. A Ray
    actor of one CPU still sees every core of its node: by that count, two actors on a
    2-core node would each start two runtime threads (four on two cores), and a node's
    one actor would have the cores other nodes' actors need."""
    global _granted
    _granted = max(1, cores)


def usable_cores() -> int:
    """The CPU cores this process may run on (``grant_cores`` caps them). llama-cpp-python's
    own default is half the machine's cores, which on 2 cores leaves one idle (slower
    extraction)."""
    free = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return free if _granted is None else min(free, _granted)


class CpuShare:
    """How many threads the next piece of work should run: the cores that other
    processes left free during the previous one.

    llama.cpp's threads spin-wait for each other at every step of a decode. When
    another process holds one of the cores, a waiting thread burns its time slice while
    the thread it waits for is descheduled, and a run beside another slows down many
    times over. With one thread per busy core
    fewer, a decode never waits on a descheduled thread. Measured from the system-wide
    CPU time less this process's own, over the previous call (or a short first look).
    """

    def __init__(self, cores: int, first_look_s: float = 0.2) -> None:
        self.cores = cores
        self.first_look_s = first_look_s
        self._proc = psutil.Process()
        self._mark: tuple[float, float, float] | None = None

    def _sample(self) -> tuple[float, float, float]:
        system = psutil.cpu_times()
        busy = sum(system) - system.idle - getattr(system, "iowait", 0.0)
        own = self._proc.cpu_times()
        return time.monotonic(), busy, own.user + own.system

    def others_busy(self) -> float:
        """Cores' worth of CPU time other processes used since the last look."""
        if self._mark is None:
            self._mark = self._sample()
            time.sleep(self.first_look_s)
        now = self._sample()
        (t0, busy0, own0), self._mark = self._mark, now
        wall = max(now[0] - t0, 1e-6)
        return max(0.0, (now[1] - busy0) - (now[2] - own0)) / wall

    def threads(self) -> int:
        free = self.cores - self.others_busy()
        return max(1, min(self.cores, int(free + FREE_CORE_SLACK)))


class PeakRSS:
    """Samples this process's resident memory in a thread while a block runs."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._proc = psutil.Process()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, self._proc.memory_info().rss)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)
