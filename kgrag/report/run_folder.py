"""A finished run folder as the report reads it: the manifest of its last run, the
metrics that run evaluated and the artefact folder of each step it lists.

The manifest names each step's artefact folder, so the report reads exactly the
artefacts of the run it shows, not others left in the folder by earlier specs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.contents.metrics import read_metrics
from kgrag.errors import KgragError
from kgrag.pipeline.manifest import MANIFEST, Manifest

EVALUATE = "evaluate"  # the step whose metrics the report shows


@dataclass(frozen=True)
class RunFolder:
    path: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any]
    artefacts: dict[str, Path]  # step name → its artefact folder

    @classmethod
    def open(cls, path: Path) -> RunFolder:
        """The finished, evaluated run in ``path``, or a ``KgragError`` that says why not."""
        if not path.is_dir():
            raise KgragError(f"no run folder {path}: give a run's outputs folder "
                             "(outputs/<spec name>)")
        if not (path / MANIFEST).is_file():
            raise KgragError(f"{path} is not a run folder: it has no {MANIFEST} (a run "
                             "writes outputs/<spec name>/)")
        try:
            manifest = Manifest.read(path).data
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise KgragError(f"{path / MANIFEST} is not a manifest: {exc}") from None
        if manifest.get("status") != "complete":
            raise KgragError(f"the run in {path} has not finished (it is running, or was "
                             "stopped): finish it with `kgrag run SPEC` and report again")
        artefacts = {step["name"]: path / step["artefact"] for step in manifest["steps"]}
        if EVALUATE not in artefacts:
            raise KgragError(f"the last run in {path} evaluated nothing: its spec has no "
                             "questions, or a `kgrag query` ran there since (it records only "
                             "the steps it needs); `kgrag run SPEC` evaluates, reusing every "
                             "artefact")
        missing = [name for name, folder in artefacts.items() if not folder.is_dir()]
        if missing:
            raise KgragError(f"{path}: the artefact of step {missing[0]} is gone "
                             f"({artefacts[missing[0]].name}); `kgrag run SPEC` rebuilds it")
        return cls(path, manifest, read_metrics(artefacts[EVALUATE]), artefacts)

    def artefact(self, step: str) -> Path:
        return self.artefacts[step]

    @property
    def name(self) -> str:
        return self.path.name
