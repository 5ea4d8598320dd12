"""Compile a spec into a plan: ordered steps with content fingerprints.

A step's fingerprint hashes its kind, the kind's code version, its normalised
config and its inputs' fingerprints. Everything that changes an artefact must
be in the config (model sha256s, source-file hashes), and nothing that does not
(paths, thread counts), so that artefacts are reused exactly when valid.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgrag.models.cache import canonical_json
from kgrag.steps.step import Step, StepKind


@dataclass
class Plan:
    """The steps of a run, in order. ``kinds`` is the registry of step kinds the plan may
    use (``kgrag.steps.KINDS``): each kind's version joins its steps' fingerprints."""

    kinds: Mapping[str, StepKind]
    steps: list[Step] = field(default_factory=list)
    # strategy name -> its retrieve step, which ``kgrag query`` loads; a run executes it
    # only when the corpus has questions (it is then in ``steps`` too)
    queries: dict[str, Step] = field(default_factory=dict)
    # per graph build variant, in spec order: {"graph": label, "kind", "steps": [names]}
    builds: list[dict[str, Any]] = field(default_factory=list)

    def step(self, name: str, kind: str, config: dict[str, Any],
             inputs: dict[str, str] | None = None) -> Step:
        """A step fingerprinted from its config and its inputs' fingerprints (inputs must
        be in the plan already), not yet added to it."""
        by_name = self.by_name()
        inputs = dict(inputs or {})
        settings = {"kind": kind, "version": self.kinds[kind].version, "config": config}
        body = canonical_json({
            **settings,
            "inputs": {role: by_name[dep].fingerprint for role, dep in inputs.items()},
        })
        return Step(name, kind, config, inputs, hashlib.sha256(body.encode()).hexdigest(),
                    hashlib.sha256(canonical_json(settings).encode()).hexdigest())

    def append(self, step: Step) -> Step:
        if step.name in self.by_name():
            raise ValueError(f"duplicate step name {step.name!r}")
        self.steps.append(step)
        return step

    def add(self, name: str, kind: str, config: dict[str, Any],
            inputs: dict[str, str] | None = None) -> Step:
        """Fingerprint a step and append it."""
        return self.append(self.step(name, kind, config, inputs))

    def shared(self, name: str, kind: str, config: dict[str, Any],
               inputs: dict[str, str] | None = None) -> Step:
        """A step, or the plan's step that it repeats (same fingerprint): training entries
        that share a stage share its step."""
        step = self.step(name, kind, config, inputs)
        same = [s for s in self.steps if s.fingerprint == step.fingerprint]
        return same[0] if same else self.append(step)

    def by_name(self) -> dict[str, Step]:
        return {s.name: s for s in self.steps}

    def upstream(self, names: list[str]) -> list[Step]:
        """The named steps and everything they depend on, in plan order."""
        by_name = self.by_name()
        needed: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(by_name[name].inputs.values())
        return [s for s in self.steps if s.name in needed]
