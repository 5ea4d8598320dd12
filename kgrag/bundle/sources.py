"""Where a spec and its corpus sources sit inside a bundle.

The spec is shipped byte for byte (its sha256 stays the manifest's), so its relative
paths must still lead to the corpus after unpacking: everything goes under ``project/``
at the places the spec names, relative to its own folder. ``../corpora/x.jsonl`` beside
``specs/q.yaml`` becomes ``project/specs/q.yaml`` and ``project/corpora/x.jsonl``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kgrag.corpus.folder import corpus_files
from kgrag.errors import KgragError
from kgrag.pipeline.compile import source_sha256
from kgrag.spec import Spec

PROJECT = "project"


@dataclass(frozen=True)
class Source:
    """One corpus source: the spec key naming it, where it sits in the bundle, its content
    hash (file or folder, as the corpus step's fingerprint has it), its path here and
    whether links out of the folder are followed (``corpus.follow_links``)."""

    key: str
    member: str
    sha256: str
    folder: bool
    path: Path
    follow_links: bool

    def files(self) -> dict[str, Path]:
        """Bundle member name → file here: the file, or every file of the folder the
        corpus step reads (a link out of it only if followed)."""
        if not self.folder:
            return {self.member: self.path}
        return {f"{self.member}/{file.relative_to(self.path).as_posix()}": file
                for file in corpus_files(self.path, self.follow_links).files}

    def record(self, copied: bool) -> dict[str, object]:
        return {"key": self.key, "member": self.member, "sha256": self.sha256,
                "folder": self.folder, "copied": copied}


def layout(spec: Spec) -> tuple[str, list[Source]]:
    """The spec's member name and its corpus sources (``corpus.path``, and
    ``corpus.questions_file`` when set), each refused if the spec names it by an absolute
    path (the replay would read that path, not the bundle's copy)."""
    named = {f"corpus.{key}": spec.corpus[key] for key in ("path", "questions_file")
             if key in spec.corpus}
    for key, value in named.items():
        if value.startswith("~") or Path(value).is_absolute():
            raise KgragError(f"{spec.path}: {key} {value!r} is not relative to the spec's "
                             "folder; a bundle ships the corpus beside the spec, so name it "
                             "relative to the spec")
    depth = max(_ups(value) for value in named.values())
    folders = spec.path.parent.parts[1:]  # without the root
    spec_dir = PurePosixPath(PROJECT, *folders[max(0, len(folders) - depth):])
    follow = spec.corpus.get("follow_links", False)
    sources = []
    for key, value in named.items():
        path = spec.resolve(value)
        sources.append(Source(key, posixpath.normpath(str(spec_dir / value)),
                              source_sha256(path, key, follow), path.is_dir(), path, follow))
    return str(spec_dir / spec.path.name), sources


def _ups(relative: str) -> int:
    """How many folders above the spec's a relative path climbs."""
    return PurePosixPath(posixpath.normpath(relative)).parts.count("..")  # all leading
