"""Compile a spec into a plan: ordered steps with content fingerprints.

A step's fingerprint hashes its kind, the kind's code version, its normalised
config and its inputs' fingerprints. Everything that changes an artefact must
be in the config (model sha256s, source-file hashes), and nothing that does not
(paths, thread counts), so that artefacts are reused exactly when valid.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from kgrag.models.cache import canonical_json
from kgrag.steps import KINDS


@dataclass(frozen=True)
class Step:
    name: str
    kind: str
    config: dict[str, Any]
    inputs: dict[str, str] = field(default_factory=dict)  # role -> upstream step name
    fingerprint: str = ""


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    # strategy name -> its retrieve step, which ``kgrag query`` loads; a run executes it
    # only when the corpus has questions (it is then in ``steps`` too)
    queries: dict[str, Step] = field(default_factory=dict)

    def step(self, name: str, kind: str, config: dict[str, Any],
             inputs: dict[str, str] | None = None) -> Step:
        """A step fingerprinted from its config and its inputs' fingerprints (inputs must
        be in the plan already), not yet added to it."""
        by_name = self.by_name()
        inputs = dict(inputs or {})
        body = canonical_json({
            "kind": kind, "version": KINDS[kind].version, "config": config,
            "inputs": {role: by_name[dep].fingerprint for role, dep in inputs.items()},
        })
        return Step(name, kind, config, inputs, hashlib.sha256(body.encode()).hexdigest())

    def append(self, step: Step) -> Step:
        if step.name in self.by_name():
            raise ValueError(f"duplicate step name {step.name!r}")
        self.steps.append(step)
        return step

    def add(self, name: str, kind: str, config: dict[str, Any],
            inputs: dict[str, str] | None = None) -> Step:
        """Fingerprint a step and append it."""
        return self.append(self.step(name, kind, config, inputs))

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
