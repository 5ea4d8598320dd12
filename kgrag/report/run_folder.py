"""A finished run folder as the report reads it: the manifest of its last run, the
metrics that run evaluated (none for a corpus without questions) and the artefact
folder of each step it lists.

The manifest names each step's artefact folder, so the report reads exactly the
artefacts of the run it shows, not others left in the folder by earlier specs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.contents.corpus import read_questions
from kgrag.contents.metrics import read_metrics
from kgrag.declarations import step_name
from kgrag.errors import KgragError
from kgrag.eval.builds import build_row
from kgrag.pipeline.graph_kinds import GRAPH_KINDS
from kgrag.pipeline.manifest import MANIFEST, Manifest
from kgrag.steps.step import BUILD_RECORD

CORPUS = "corpus"  # the import step: documents and questions
EVALUATE = "evaluate"  # the step whose metrics the report shows


@dataclass(frozen=True)
class RunFolder:
    path: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any] | None  # None: the corpus has no questions to evaluate
    artefacts: dict[str, Path]  # step name → its artefact folder

    @classmethod
    def open(cls, path: Path) -> RunFolder:
        """The finished run in ``path``, evaluated unless its corpus has no questions, or
        a ``KgragError`` that says why not."""
        if not path.is_dir():
            raise KgragError(f"no run folder {path}: give a run's spec or its outputs "
                             "folder (outputs/<spec name>)")
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
        missing = [name for name, folder in artefacts.items() if not folder.is_dir()]
        if missing:
            raise KgragError(f"{path}: the artefact of step {missing[0]} is gone "
                             f"({artefacts[missing[0]].name}); `kgrag run SPEC` rebuilds it")
        if EVALUATE in artefacts:
            return cls(path, manifest, read_metrics(artefacts[EVALUATE]), artefacts)
        if CORPUS not in artefacts or not read_questions(artefacts[CORPUS]).is_empty():
            raise KgragError(f"the last run in {path} evaluated nothing, though its corpus has "
                             "questions: it was a `kgrag query`'s, which builds only the steps "
                             "it needs; `kgrag run SPEC` evaluates, reusing every artefact")
        return cls(path, manifest, None, artefacts)

    def artefact(self, step: str) -> Path:
        return self.artefacts[step]

    @property
    def builds(self) -> list[dict[str, Any]]:
        """Each graph build's row (``kgrag.eval.builds``): the evaluated metrics', or for a
        run that evaluated nothing, made here from the records its steps' artefacts keep.
        A build's steps are named ``<artefact>.<build>``; the kind of a build is the first
        kind whose graph step it has (a hierarchy build extracts too, as an entities one
        does)."""
        if self.metrics is not None:
            return self.metrics["builds"]
        steps: dict[str, list[str]] = {}  # build → its steps, in plan order
        for step in self.manifest["steps"]:
            _, dot, build = step["name"].partition(".")
            if dot and step["kind"] != "dense_index":  # a strategy's own dense index
                steps.setdefault(build, []).append(step["name"])
        rows = []
        for build, names in steps.items():
            kind = next((kind for kind in GRAPH_KINDS.values()
                         if step_name(kind.view.artefact, build) in names), None)
            if kind is not None:
                rows.append(build_row(build, kind.name, [self._record(n) for n in names]))
        return rows

    def _record(self, step: str) -> dict[str, Any] | None:
        """The record of the run that built a step's artefact (None: an older kgrag's)."""
        path = self.artefact(step) / BUILD_RECORD
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def name(self) -> str:
        return self.path.name
