"""Registered step kinds: the allowlist a plan may use.

A spec can only name these kinds (through its sections); it never names
Python code. Each kind has one uniform signature: ``run(ctx)`` reads the
artefacts of its inputs and writes its own into ``ctx.out_dir``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgrag.pipeline.runner import StepContext


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
    max_llm_calls: Callable[[dict[str, Any], Counts], int | None]
    publish: tuple[str, ...] = ()


@dataclass(frozen=True)
class Counts:
    """What a dry run knows about the data before running: exact once the steps that
    produce it have run, otherwise bounded from the spec, otherwise None."""

    questions: int | None
    chunks: int | None


KINDS: dict[str, StepKind] = {}


def no_llm(config: dict[str, Any], counts: Counts) -> int:
    return 0


def step_kind(name: str, version: str, *, max_llm_calls=no_llm, publish: tuple[str, ...] = ()):
    """Register the decorated function as the body of step kind ``name``."""

    def register(run: Callable[[StepContext], None]) -> Callable[[StepContext], None]:
        if name in KINDS:
            raise RuntimeError(f"step kind {name!r} registered twice")
        KINDS[name] = StepKind(name, version, run, max_llm_calls, publish)
        return run

    return register
