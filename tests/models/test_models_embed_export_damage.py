"""A damaged export of the embedder is found by its checksums and exported again.

Real exports of the bundled MiniLM (fp32 ONNX, and OpenVINO converted from it), made once
for the module and copied into each test's cache folder before it is damaged there.
Where a test damages the fp32 ONNX model and only needs the damage found and the model
replaced, the exporter is stood in for by a copy of the module's export (tens of seconds
saved per test); one test replaces it by the real exporter, end to end.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from kgrag.models.cache import CallCache
from kgrag.models.embed import export as embed_export
from kgrag.models.embed.backends import BACKENDS
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings, SentenceTransformerBackend
from kgrag.models.embed.export import MANIFEST
from kgrag.models.embed.runtime import ExportedBackend, calibration_texts
from kgrag.models.registry import resolve_embedder

TEXTS = ["Copenhagen is in Denmark.", "The Rhine flows through Basel and Cologne."]


@pytest.fixture(scope="module")
def settings() -> EmbedderSettings:
    model = resolve_embedder("all-MiniLM-L6-v2")
    return EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, settings: EmbedderSettings) -> Path:
    """A folder of exports holding the fp32 ONNX export and the OpenVINO one, whole."""
    root = tmp_path_factory.mktemp("exports") / "exported-embedders"
    for name in ("onnx", "openvino"):
        ExportedBackend(settings.path, settings.sha256, BACKENDS[name], root,
                        calibration_texts).load()
    return root


@pytest.fixture(scope="module")
def reference(settings: EmbedderSettings) -> np.ndarray:
    return SentenceTransformerBackend(settings).encode(TEXTS)


def export_of(root: Path, kind: str) -> Path:
    (folder,) = root.glob(f"{kind}-*")
    return folder


def with_backend(settings: EmbedderSettings, name: str) -> EmbedderSettings:
    return EmbedderSettings(settings.name, settings.path, settings.sha256, backend=name)


def copied_exports(clean: Path, cache: CallCache) -> Path:
    """The module's exports, copied to where ``cache``'s embedder looks for them."""
    root = cache.directory / "exported-embedders"
    shutil.copytree(clean, root)
    return root


def copying_exporter(clean: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Stand in for PyTorch's exporter with a copy of the module's fp32 export; the files
    it wrote, in order."""
    written: list[Path] = []

    def export(model_dir: Path, out: Path) -> None:
        shutil.copyfile(export_of(clean, "onnx") / "model.onnx", out)
        written.append(out)

    monkeypatch.setattr(embed_export, "_export_onnx", export)
    return written


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def flip_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:16] = bytes(b ^ 0xFF for b in data[:16])
    path.write_bytes(bytes(data))


def change_weights(path: Path) -> None:
    """Negate one layer's weight matrix in place: the file stays a valid model (the ONNX
    checker passes it) that computes other vectors."""
    model = onnx.load(str(path))
    # the largest is the token embeddings, read only for the tokens a text holds; the
    # next is a layer's weight matrix, which every text passes through
    weights = sorted(model.graph.initializer, key=lambda i: len(i.raw_data))[-2].raw_data
    data = path.read_bytes()
    at = data.find(weights)
    negated = (-np.frombuffer(weights, dtype=np.float32)).tobytes()
    path.write_bytes(data[:at] + negated + data[at + len(weights):])
    onnx.checker.check_model(str(path))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == embed_export.__name__ and r.levelno == logging.WARNING]


def test_an_export_lists_every_file_with_its_size_and_sha256(clean):
    for kind, files in (("onnx", {"model.onnx"}), ("openvino", {"model.xml", "model.bin"})):
        folder = export_of(clean, kind)
        manifest = json.loads((folder / MANIFEST).read_text())
        assert set(manifest["files"]) == files
        for name, listed in manifest["files"].items():
            content = (folder / name).read_bytes()
            assert listed == {"size": len(content),
                              "sha256": hashlib.sha256(content).hexdigest()}
        assert manifest["made_by"]["model_sha256"] == resolve_embedder(
            "all-MiniLM-L6-v2").sha256


DAMAGE: dict[str, tuple[str, str, Callable[[Path], None], str]] = {
    # case: backend, the file damaged, how, what the warning says of it
    "onnx truncated": ("onnx", "onnx/model.onnx", truncate, "model.onnx is "),
    "onnx bytes flipped": ("onnx", "onnx/model.onnx", flip_header,
                           "model.onnx changed (its sha256 differs"),
    "onnx weights changed, still valid": ("onnx", "onnx/model.onnx", change_weights,
                                          "model.onnx changed (its sha256 differs"),
    "openvino weights truncated": ("openvino", "openvino/model.bin", truncate,
                                   "model.bin is "),
    "manifest deleted": ("onnx", f"onnx/{MANIFEST}", Path.unlink, f"{MANIFEST} missing"),
    "manifest without checksums": ("onnx", f"onnx/{MANIFEST}",
                                   lambda p: p.write_text(json.dumps({"format": 1})),
                                   f"{MANIFEST} lists no checksums"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_export_is_exported_again_with_one_warning(
        case, settings, clean, reference, cache, monkeypatch, caplog):
    name, damaged, damage, problem = DAMAGE[case]
    root = copied_exports(clean, cache)
    kind, filename = damaged.split("/")
    folder = export_of(root, kind)
    damage(folder / filename)
    written = copying_exporter(clean, monkeypatch)
    with caplog.at_level(logging.WARNING):
        vectors = CachedEmbedder(with_backend(settings, name), cache).encode(TEXTS)
    np.testing.assert_allclose(vectors, reference, atol=2e-5)  # the model's own vectors
    (warning,) = warnings_of(caplog)
    assert "\n" not in warning
    assert f"the exported embedder {folder} is damaged ({problem}" in warning
    assert warning.endswith("; exporting it again")
    assert len(written) == (kind == "onnx")  # a damaged OpenVINO model: the ONNX was whole
    assert embed_export._damage(folder) is None  # whole again, and listed
    assert sorted(p.name for p in root.iterdir()) == sorted(
        p.name for p in clean.iterdir())  # nothing left aside


def test_changed_weights_are_exported_again_by_the_real_exporter(
        settings, clean, reference, cache, caplog):
    """The worst damage, end to end: a valid model computing other vectors, which the
    clean model's cache keys would have kept."""
    root = copied_exports(clean, cache)
    model = export_of(root, "onnx") / "model.onnx"
    change_weights(model)
    with caplog.at_level(logging.WARNING):
        embedder = CachedEmbedder(with_backend(settings, "onnx"), cache)
        vectors = embedder.encode(TEXTS)
    assert len(warnings_of(caplog)) == 1
    np.testing.assert_allclose(vectors, reference, atol=2e-5)
    assert embed_export._damage(model.parent) is None
    again = CachedEmbedder(with_backend(settings, "onnx"), cache)
    np.testing.assert_array_equal(again.encode(TEXTS), vectors)  # the cached vectors
    assert again.usage.calls == 0


def test_the_next_export_removes_the_temporary_folder_a_killed_one_left(
        settings, clean, cache, monkeypatch):
    root = cache.directory / "exported-embedders"
    killed = root / ".onnx-k1ll3d"  # as ``tempfile.mkdtemp`` names an export's folder
    killed.mkdir(parents=True)
    (killed / "model.onnx").write_bytes(
        (export_of(clean, "onnx") / "model.onnx").read_bytes()[:1 << 20])
    written = copying_exporter(clean, monkeypatch)
    CachedEmbedder(with_backend(settings, "onnx"), cache).encode(TEXTS[:1])
    assert len(written) == 1 and not killed.exists()
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [embed_export.LOCK, export_of(root, "onnx").name])
