"""The embedder's inference backends: which runtime computes a sentence's vector.

``torch`` runs the model through sentence-transformers, as kgrag always has. The others
run a copy of the same model exported once to ONNX (``kgrag.models.embed.export``)
through an optimised CPU runtime, fp32 or int8 (``kgrag.models.embed.runtime``).

A backend is part of the vectors' identity: an int8 model's vectors differ from the fp32
ones, so they are cached, and fingerprinted, apart (``identity``). ``torch`` adds
nothing to either, so the caches and fingerprints made before backends existed stay
valid.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass

from kgrag.errors import KgragError
from kgrag.models.cache import canonical_json

TORCH = "torch"


@dataclass(frozen=True)
class Backend:
    """One way to run the embedder: its runtime (a module, and the package that
    provides it) and whether its model is quantised to int8."""

    name: str
    runtime: str  # the module imported to run the model
    package: str  # the PyPI package that provides ``runtime``
    int8: bool
    summary: str


BACKENDS = {b.name: b for b in (
    Backend(TORCH, "sentence_transformers", "sentence-transformers", False,
            "sentence-transformers on PyTorch, fp32 (the reference)"),
    Backend("onnx", "onnxruntime", "onnxruntime", False, "ONNX Runtime, fp32"),
    Backend("onnx-int8", "onnxruntime", "onnxruntime", True,
            "ONNX Runtime, weights and activations in int8 (dynamic quantisation)"),
    Backend("openvino", "openvino", "openvino", False, "OpenVINO, fp32"),
    Backend("openvino-int8", "nncf", "nncf", True,
            "OpenVINO, int8 (static quantisation, calibrated by NNCF)"),
)}


def backend(name: str) -> Backend:
    """The backend ``name``, its runtime present (else one message naming the package to
    install): checked when a spec's models are resolved, before any work."""
    if name not in BACKENDS:
        raise KgragError(f"unknown embedder backend {name!r}; one of {', '.join(BACKENDS)}")
    chosen = BACKENDS[name]
    for module, package in _needs(chosen):
        if importlib.util.find_spec(module) is None:
            raise KgragError(
                f"the embedder backend {name!r} needs the Python package {package}, which is "
                f"not installed: install it (pip install {package}) or set "
                f"models.embedder.backend to {TORCH!r}")
    return chosen


def _needs(chosen: Backend) -> list[tuple[str, str]]:
    """The modules (and their packages) a backend imports: every exported backend also
    exports through PyTorch's ONNX exporter; OpenVINO int8 runs on OpenVINO."""
    if chosen.name == TORCH:
        return [(chosen.runtime, chosen.package)]
    needs = [("onnx", "onnx"), ("onnxscript", "onnxscript"), (chosen.runtime, chosen.package)]
    return needs + ([("openvino", "openvino")] if chosen.runtime == "nncf" else [])


def identity(model_sha256: str, backend_name: str) -> str:
    """What names an embedder's vectors in fingerprints: the model's sha256 under
    ``torch`` (as before backends existed), else a hash of the model and the backend."""
    if backend_name == TORCH:
        return model_sha256
    body = canonical_json({"model_sha256": model_sha256, "backend": backend_name})
    return hashlib.sha256(body.encode()).hexdigest()
