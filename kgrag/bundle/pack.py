"""``kgrag bundle``: a finished run as one file another machine can replay.

A bundle holds what recomputing the run needs and nothing it can recompute: the spec,
its corpus (or only the corpus's sha256), the call-cache entries the run's steps used
(each artefact lists their keys in ``calls.json``), the run's manifest and metrics, the
model sha256s and library versions. No artefact is shipped: a replay rebuilds them all,
every model call answered by the bundled entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kgrag.bundle.archive import write_archive
from kgrag.bundle.sources import layout
from kgrag.contents.metrics import METRICS
from kgrag.errors import KgragError
from kgrag.models import Models
from kgrag.models.cache import CallCache, canonical_json
from kgrag.pipeline.artefacts import CALLS_RECORD
from kgrag.pipeline.integrity import damage
from kgrag.pipeline.manifest import MANIFEST
from kgrag.pipeline.plan import Plan
from kgrag.spec import Spec

CALLS = "calls.jsonl"  # one [key, payload] per line


class Run(Protocol):
    """A spec with its cache, models and compiled plan (``kgrag.api.Session``), all read
    only: a bundle never replaces them (the session is a frozen dataclass)."""

    @property
    def spec(self) -> Spec: ...

    @property
    def cache(self) -> CallCache: ...

    @property
    def models(self) -> Models: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def run_dir(self) -> Path: ...

    def artefact(self, step_name: str) -> Path: ...


@dataclass(frozen=True)
class BundleSummary:
    path: Path
    size_bytes: int
    calls: int
    corpus_copied: bool


def make_bundle(session: Run, out: Path, *, copy_corpus: bool = True) -> BundleSummary:
    """Pack the completed run of ``session``'s spec into ``out``."""
    spec = session.spec
    keys: set[str] = set()
    unrecorded = []
    for step in session.plan.steps:
        folder = session.artefact(step.name)
        state = None
        if not folder.exists():
            state = "has not been built"
        elif (problem := damage(folder)) is not None:
            state = f"is damaged ({problem})"
        if state is not None:
            raise KgragError(f"{spec.path}: step {step.name} {state}, so there is no finished "
                             f"run to bundle; run `kgrag run {spec.path}` first")
        if not (folder / CALLS_RECORD).exists():
            unrecorded.append(step.name)
        else:
            keys.update(json.loads((folder / CALLS_RECORD).read_text()))
    if unrecorded:
        raise KgragError(
            f"{spec.path}: step(s) {', '.join(unrecorded)} were built before kgrag recorded the "
            "cache entries a step uses; rebuild them from the cache (no model call is paid "
            f"again) with `kgrag run {spec.path} --force corpus`, then bundle")
    manifest = session.run_dir / MANIFEST
    if not manifest.exists():
        raise KgragError(f"{manifest} is missing; run `kgrag run {spec.path}` again, then bundle")
    manifest_bytes = manifest.read_bytes()
    spec_member, sources = layout(spec)
    members = {spec_member: spec.path.read_bytes(),
               CALLS: "".join(canonical_json([key, payload]) + "\n" for key, payload
                              in session.cache.entries(sorted(keys))).encode(),
               MANIFEST: manifest_bytes}
    if "evaluate" in session.plan.by_name():
        members[METRICS] = (session.artefact("evaluate") / METRICS).read_bytes()
    if copy_corpus:
        for source in sources:
            members |= {name: file.read_bytes() for name, file in source.files().items()}
    described = session.models.describe(step.config for step in session.plan.steps)
    index = {
        "name": spec.name, "spec": spec_member,
        "sources": [source.record(copy_corpus) for source in sources],
        "models": {role: {k: v for k, v in model.items() if k != "path"}
                   for role, model in described.items()},
        "libraries": json.loads(manifest_bytes)["libraries"],
        "steps": {step.name: step.fingerprint for step in session.plan.steps},
        "calls": len(keys),
    }
    write_archive(out, index, members)
    return BundleSummary(out, out.stat().st_size, len(keys), copy_corpus)
