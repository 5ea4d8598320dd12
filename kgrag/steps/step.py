"""The step contract: what a step is, what a step kind is, what its body may touch, and
how a kind is declared.

A kind has one uniform signature: ``run(ctx)`` reads the artefacts of its inputs and
writes its own into ``ctx.out_dir``. ``step_kind`` turns a body into a ``StepKind``;
``kgrag.steps`` lists every kind explicitly in ``KINDS``, the allowlist a plan may
use (a spec names sections, never Python code).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kgrag.progress import progress

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
# Inside every artefact folder: the manifest record of the run that built it (wall time,
# peak memory, model calls and cache hits, notes), so its cost outlives that run.
BUILD_RECORD = "build.json"
# Beside the artefact folders: ``<prefix><step>-<fingerprint12>``, a long step's state
# while it runs (``StepContext.resume_dir``).
RESUME_PREFIX = ".resume-"


class OwnWorkFailed(Exception):
    """A step's own work failed inside ``StepContext.from_earlier`` (``StepContext.own``):
    carries the error to raise."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class Step:
    """One step of a plan: its kind, its config, the upstream step playing each input
    role, and its fingerprints (``kgrag.pipeline.plan``): of everything, and of its kind,
    version and config alone (``settings``: equal for one step over changed inputs)."""

    name: str
    kind: str
    config: dict[str, Any]
    inputs: dict[str, str] = field(default_factory=dict)  # role -> upstream step name
    fingerprint: str = ""
    settings: str = ""


@dataclass
class StepContext:
    """Everything a step body may touch: its config, inputs, models and output folder."""

    step: Step
    spec: Any
    models: Any
    out_dir: Path
    inputs: dict[str, Path]
    notes: dict[str, Any] = field(default_factory=dict)
    find_earlier: Callable[[], Path | None] = lambda: None
    # which part of its items a step that works a part at a time is on, for its progress
    part: str = ""

    @functools.cached_property
    def earlier(self) -> Path | None:
        """The newest intact artefact of this step in the run folder built with the same
        settings over other inputs (``kgrag.pipeline.runner.earlier_artefact``), looked for
        when first asked: a step that can update what it built before its inputs changed,
        rather than build it anew, reads there what still holds (``from_earlier``)."""
        return self.find_earlier()

    def from_earlier(self, read: Callable[[Path], R | None]) -> R | None:
        """``read(earlier)``, None where it is None (nothing there to take), where there is
        no earlier artefact, or where it cannot be read (a file damaged in a way its
        listing did not show): reusing it is a shortcut, and a shortcut missed is said once
        and costs the work it would have saved, never the step. The step's own work that
        ``read`` calls (``own``: embedding the new chunks while a table grows) fails as it
        would outside it, not as an artefact that cannot be read. What was taken is noted
        (``reused_from``: ``kgrag run`` says that the step started from it)."""
        earlier = self.earlier
        if earlier is None:
            return None
        try:
            taken = read(earlier)
        except OwnWorkFailed as failed:
            raise failed.error from None
        except Exception as exc:  # noqa: BLE001 - whatever a damaged file raises, polars or LanceDB
            log.warning("%s: what %s holds cannot be read (%s); building it anew",
                        self.step.name, earlier.name, exc)
            return None
        if taken is not None:
            self.notes["reused_from"] = earlier.name
        return taken

    @staticmethod
    def own(work: Callable[..., R]) -> Callable[..., R]:
        """``work`` as ``from_earlier``'s ``read`` calls it: what it raises is the step's
        own failure, raised as it is, rather than a sign that the earlier artefact is
        damaged."""
        @functools.wraps(work)
        def doing(*args: Any, **kwargs: Any) -> R:
            try:
                return work(*args, **kwargs)
            except Exception as exc:
                raise OwnWorkFailed(exc) from exc
        return doing

    @property
    def config(self) -> dict[str, Any]:
        return self.step.config

    @property
    def executor(self) -> Any:
        """Where the step's work that calls no LLM runs (spaCy's parses, the embedder's
        vectors): the spec's executor (``kgrag.models.executor``)."""
        return self.models.executor

    def input(self, role: str) -> Path:
        """The artefact folder of the upstream step playing ``role`` (e.g. "chunks")."""
        return self.inputs[role]

    @property
    def resume_dir(self) -> Path:
        """Where a long step keeps its state while it runs, beside its artefact (whose
        folder exists only once complete): a stopped run leaves it, a rerun of the same
        step (same fingerprint) continues from it, and the step removes it once done."""
        return (self.out_dir.parent
                / f"{RESUME_PREFIX}{self.step.name}-{self.step.fingerprint[:12]}")

    def progress(self, iterable: Iterable[T], total: int | None = None, desc: str = "",
                 unit: str = "it") -> Iterator[T]:
        """Counts, rate and ETA: a bar on a terminal, a line every half minute in a log."""
        desc = desc or self.step.name
        return progress(iterable, total, f"{desc} ({self.part})" if self.part else desc, unit)

    def map_calls(self, role: str, task: Callable[[Any, T], R], items: Sequence[T], *,
                  desc: str, unit: str) -> list[R]:
        """``task(llm, item)`` for every item, in order, with the LLM playing ``role``,
        through the spec's executor (``kgrag.models.executor``: in this process or on
        Ray workers, with the same outputs; a served model's ``concurrency`` items at a
        time), counting the items as they finish."""
        return self.models.executor_for(role).map(
            self.models.llm(role), task, items,
            lambda done: self.progress(done, total=len(items), desc=desc, unit=unit))


@dataclass(frozen=True)
class Counts:
    """What a dry run knows about the data before running: exact once the steps that
    produce it have run, otherwise bounded from the spec, otherwise None."""

    questions: int | None
    chunks: int | None


def no_llm(config: dict[str, Any], counts: Counts) -> int:
    return 0


@dataclass(frozen=True)
class StepKind:
    """What a kind of step is: its code version, body and cost estimate.

    ``version`` is part of every fingerprint: bump it whenever the kind's code
    changes what it writes, so stale artefacts are rebuilt rather than reused.
    ``max_llm_calls(config, counts)`` bounds the LLM calls for --dry-run (None: unknown).
    ``publish`` names files copied to the run folder (e.g. metrics.json).
    """

    name: str
    version: str
    run: Callable[[StepContext], None]
    max_llm_calls: Callable[[dict[str, Any], Counts], int | None] = no_llm
    publish: tuple[str, ...] = ()


def step_kind(name: str, version: str, *, max_llm_calls=no_llm, publish: tuple[str, ...] = ()
              ) -> Callable[[Callable[[StepContext], None]], StepKind]:
    """Declare the decorated function as the body of step kind ``name``."""

    def declare(run: Callable[[StepContext], None]) -> StepKind:
        return StepKind(name, version, run, max_llm_calls, publish)

    return declare
