"""``outputs/<name>/manifest.json``: what ran, what it cost, with which models, libraries
and machine.

The machine is there because greedy LLM answers follow it: llama.cpp is compiled for the
CPU it is built on and picks its kernels by instruction set (AVX2, AVX-512…), so the same
spec recomputed on another CPU can answer differently while its retrieval does not. What
reproduces answers is the shipped call cache; the manifest says where they came from.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from kgrag.host import usable_cores
from kgrag.pipeline.artefacts import write_json_atomic

MANIFEST = "manifest.json"  # in the run folder
LIBRARIES = ("kgrag", "llama_cpp_python", "sentence-transformers", "transformers", "torch",
             "lancedb", "polars", "diskcache", "jsonschema", "pyyaml", "spacy")


def machine() -> dict[str, Any]:
    """CPU model, usable cores, OS, and the instruction sets llama.cpp's kernels use."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    import llama_cpp

    return {"cpu": cpu, "cores": usable_cores(), "platform": platform.platform(),
            "llama_cpp": llama_cpp.llama_print_system_info().decode().strip()}


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@dataclass
class Manifest:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, run_dir: Path, spec: Any, models: Any, steps: list[Any]) -> Manifest:
        """A running manifest of ``steps``, naming the models they use (and no other)."""
        data = {
            "spec": str(spec.path), "spec_sha256": spec.sha256, "status": "running",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "models": models.describe(step.config for step in steps),
            "libraries": library_versions(), "machine": machine(),
            "steps": [],
        }
        manifest = cls(run_dir / MANIFEST, data)
        manifest.write()
        return manifest

    @classmethod
    def read(cls, run_dir: Path) -> Manifest:
        """The manifest in ``run_dir``: that of the last command that ran there."""
        path = run_dir / MANIFEST
        return cls(path, json.loads(path.read_text()))

    def record(self, step: dict[str, Any]) -> None:
        self.data["steps"].append(step)

    def finish(self) -> None:
        self.data["status"] = "complete"
        self.data["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.write()

    def write(self) -> None:
        write_json_atomic(self.path, self.data)

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.data["steps"]
