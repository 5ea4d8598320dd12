"""What the fuzzes of ``benchmarks/spec_fuzz.py --kind replies|bundles|documents`` share:
each mutant's outcome judged under a time limit, the tally of outcomes, mutations and
failures, and the figures printed at the end."""

from __future__ import annotations

import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Hung(BaseException):
    """A mutant still running past the limit (a BaseException: no ``except Exception``
    of the code under test may swallow it)."""


@dataclass
class Tally:
    """Every mutant's outcome, every mutation applied, and each failure's story."""

    outcomes: Counter[str] = field(default_factory=Counter)
    applied: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def judge(self, name: str, outcome: Callable[[], str], limit: float) -> None:
        """Count ``outcome()``, which must return within ``limit`` seconds; a hang or
        anything it raises is a failure, told under ``name``."""
        signal.signal(signal.SIGALRM, _hang)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            result = outcome()
        except Hung:
            result = "hung"
            self.failures.append(f"{name}: still running after {limit:g} s")
        except BaseException as exc:  # what the fuzz looks for: anything else
            if isinstance(exc, KeyboardInterrupt):
                raise
            result = "failed"
            self.failures.append(f"{name}: {''.join(traceback.format_exception(exc, limit=-4))}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        self.outcomes[result] += 1

    def every_hundred(self, number: int, echo: Callable[[str], None]) -> None:
        if (number + 1) % 100 == 0:
            echo(f"{number + 1} mutants: {dict(self.outcomes)}")


def _hang(_signum: int, _frame: Any) -> None:
    raise Hung


def report(what: str, mutants: int, seed: int, fuzz: Callable[[], Tally],
           order: tuple[str, ...] = ()) -> int:
    """Run ``fuzz`` and print its figures (outcomes in ``order``, then the rest by count);
    1 if any mutant failed."""
    started = time.monotonic()
    tally = fuzz()
    took = time.monotonic() - started
    print(f"\n{mutants} {what} mutants (seed {seed}) in {took:.1f} s "
          f"({took / max(mutants, 1) * 1000:.0f} ms a mutant)")
    print("mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.applied.items())))
    rest = sorted((k for k in tally.outcomes if k not in order), key=lambda k: -tally.outcomes[k])
    for result in (*order, *rest):
        print(f"  {result:<17} {tally.outcomes[result]:>6}")
    for failure in tally.failures:
        print(f"\nFAILED {failure}")
    return 1 if tally.failures else 0
