"""Progress of long loops, visible on a terminal and in a log alike.

tqdm draws a bar on a terminal and, left to decide for itself, nothing at all when
stderr is not one: under ``nohup``, in CI or piped to a file a ten-minute step was
silent until it ended. So outside a terminal a ``Progress`` prints one plain line
every ``INTERVAL_S`` seconds instead (count, rate, ETA). Loops that end sooner
print nothing in either mode, so short steps and tests stay quiet.

The runner names the step being run (``step_label``), and every line carries it:
a log of a long run then says which step is where, also for progress reported from
inside a library call (the embedder's batches) that does not know its step.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, TypeVar

from tqdm import tqdm

T = TypeVar("T")

INTERVAL_S = 30.0  # between two lines outside a terminal
TERMINAL_DELAY_S = 2.0  # a bar appears only for loops that take longer

_step: ContextVar[str] = ContextVar("kgrag_step", default="")


@contextmanager
def step_label(name: str) -> Iterator[None]:
    """Prefix every progress line printed inside the block with the step's name."""
    token = _step.set(name)
    try:
        yield
    finally:
        _step.reset(token)


def duration(seconds: float) -> str:
    """``1h 02m``, ``3m 05s`` or ``42s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


def rate(done: int, elapsed: float, unit: str) -> str:
    """Items per second, or per minute when slower than one a second."""
    per_s = done / elapsed if elapsed > 0 else 0.0
    return f"{per_s:.1f} {unit}/s" if per_s >= 1 else f"{per_s * 60:.1f} {unit}/min"


class Progress:
    """Counts the items of one loop; ``tick`` after each, or iterate ``wrap``.

    ``total`` may be None (a loop whose length is found as it goes: no ETA then).
    """

    def __init__(self, desc: str, total: int | None = None, unit: str = "it",
                 stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        step = _step.get()
        self.label = f"[{step}] {desc}" if step and step != desc else desc
        self.total, self.unit, self.done = total, unit, 0
        self.started = self.last_line = time.monotonic()
        self._bar = (tqdm(total=total, desc=self.label, unit=unit, file=self.stream,
                          delay=TERMINAL_DELAY_S, leave=False, dynamic_ncols=True)
                     if self.stream.isatty() else None)

    def tick(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self.last_line >= INTERVAL_S:
            self.last_line = now
            print(self.line(now - self.started), file=self.stream, flush=True)

    def line(self, elapsed: float) -> str:
        """``[extract.skel] extract 40/323 (12%), 7.3 chunk/min, ETA 38m 42s, 5m 29s elapsed``."""
        count = f"{self.done}"
        eta = ""
        if self.total:
            count += f"/{self.total} ({100 * self.done / self.total:.0f}%)"
            if self.done:
                eta = f", ETA {duration(elapsed * (self.total - self.done) / self.done)}"
        return (f"  {self.label} {count}, {rate(self.done, elapsed, self.unit)}{eta}, "
                f"{duration(elapsed)} elapsed")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def wrap(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield each item, counting it once the loop body has finished with it."""
        try:
            for item in iterable:
                yield item
                self.tick()
        finally:
            self.close()


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "",
             unit: str = "it") -> Iterator[T]:
    """``iterable`` with progress reporting (see the module docstring)."""
    if total is None and isinstance(iterable, Sized):
        total = len(iterable)
    return Progress(desc, total, unit).wrap(iterable)
