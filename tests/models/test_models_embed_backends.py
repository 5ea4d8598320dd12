"""The embedder's exported backends: real exports of the bundled MiniLM, real runtimes."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kgrag import api, host
from kgrag.cli import main
from kgrag.errors import KgragError
from kgrag.models.cache import CallCache, request_key
from kgrag.models.embed import runtime
from kgrag.models.embed.backends import BACKENDS
from kgrag.models.embed.embedder import (
    CachedEmbedder,
    EmbedderSettings,
    SentenceTransformerBackend,
    runner,
)
from kgrag.models.embed.export import LOCK, MANIFEST, exported
from kgrag.models.embed.runtime import (
    PAD_TO,
    RUN_TEXTS,
    ExportedBackend,
    calibration_texts,
)
from kgrag.models.registry import resolve_embedder
from tests.conftest import SHARED_DATA, write_spec


def paragraphs(n: int) -> list[str]:
    """``n`` real MuSiQue paragraphs of many lengths, the texts a dense index embeds."""
    texts: list[str] = []
    with open(SHARED_DATA / "musique_200.jsonl") as handle:
        for line in handle:
            texts += [p["paragraph_text"] for p in json.loads(line)["paragraphs"]]
            if len(texts) >= n:
                return texts[:n]
    raise AssertionError(f"fewer than {n} paragraphs")


@pytest.fixture(scope="module")
def settings() -> EmbedderSettings:
    m = resolve_embedder("all-MiniLM-L6-v2")
    return EmbedderSettings(name=m.name, path=m.path, sha256=m.sha256)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> CallCache:
    """One cache for the module, so each backend is exported once for all its tests."""
    cache = CallCache(tmp_path_factory.mktemp("calls"))
    yield cache
    cache.close()


@pytest.fixture(scope="module")
def reference(settings) -> tuple[list[str], np.ndarray]:
    texts = paragraphs(40) + ["Copenhagen is in Denmark.", "x"]
    return texts, SentenceTransformerBackend(settings).encode(texts)


def with_backend(settings: EmbedderSettings, name: str) -> EmbedderSettings:
    return EmbedderSettings(settings.name, settings.path, settings.sha256, backend=name)


@pytest.mark.parametrize("name", ["onnx", "openvino"])
def test_fp32_backends_give_torchs_vectors(settings, shared, reference, name):
    texts, expected = reference
    vectors = CachedEmbedder(with_backend(settings, name), shared).encode(texts)
    assert vectors.shape == expected.shape and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected, atol=2e-5)


@pytest.mark.parametrize("name", ["onnx-int8", "openvino-int8"])
def test_int8_backends_stay_near_torchs_vectors(settings, shared, reference, name):
    texts, expected = reference
    vectors = CachedEmbedder(with_backend(settings, name), shared).encode(texts)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * expected).sum(axis=1)
    assert cosines.min() > 0.85 and np.median(cosines) > 0.9  # unrelated texts: ~0.1-0.5
    assert not np.allclose(vectors, expected, atol=1e-4)  # quantised: not the fp32 vectors


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two cores")
def test_a_one_thread_openvino_run_keeps_every_core(settings, shared, monkeypatch):
    """Was: OpenVINO pinned its one inference thread to the first core, so two one-CPU
    Ray workers of a node (each a process of one thread) ran on the same core. Every
    thread of the process, sampled while it embeds, may still run on every core."""
    # the threads earlier tests left in this process are not this backend's (a full-suite
    # run once saw one of them pinned to one core); this one, which calls the backend, is
    # sampled with the backend's own
    earlier = set(os.listdir("/proc/self/task")) - {str(threading.get_native_id())}
    monkeypatch.setattr(host, "_granted", 1)  # a one-CPU Ray worker's grant
    backend = runner(with_backend(settings, "openvino-int8"), shared)
    backend.load()  # the export's calibration is NNCF's, pinned or not: not under test
    texts = paragraphs(64)
    cores = set(os.sched_getaffinity(0))
    seen: set[frozenset[int]] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for task in set(os.listdir("/proc/self/task")) - earlier:
                try:
                    seen.add(frozenset(os.sched_getaffinity(int(task))))
                except OSError:  # a thread that ended between the listing and the look
                    pass
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for _ in range(5):
            backend.encode(texts)
    finally:
        done.set()
        sampler.join()
    assert seen == {frozenset(cores)}


def test_the_runtime_sees_few_input_shapes_whatever_the_batch(settings, shared, reference):
    """OpenVINO keeps memory for every input shape it has run: a batch of 42 texts of
    many lengths reaches it in pieces of at most ``RUN_TEXTS`` texts, padded to a multiple
    of ``PAD_TO`` tokens, and gives the vectors of one text at a time."""
    texts, _ = reference
    embedder = CachedEmbedder(with_backend(settings, "openvino-int8"), shared)
    backend = embedder.backend
    backend.load()
    shapes: list[tuple[int, ...]] = []
    run = backend._run

    def seen(inputs):
        shapes.append(inputs["input_ids"].shape)
        return run(inputs)

    backend._run = seen
    together = backend.encode(texts)
    alone = np.concatenate([backend.encode([t]) for t in texts])
    pieces = -(-len(texts) // RUN_TEXTS)
    assert len(texts) > RUN_TEXTS and len(shapes) == pieces + len(texts)
    assert [s[0] for s in shapes[:pieces]] == [
        min(RUN_TEXTS, len(texts) - start) for start in range(0, len(texts), RUN_TEXTS)]
    assert all(length % PAD_TO == 0 for _, length in shapes)
    assert len(set(shapes)) < len({len(t) for t in texts})  # far fewer shapes than lengths
    np.testing.assert_allclose(together, alone, atol=1e-3)


def test_a_second_run_exports_nothing(settings, shared):
    CachedEmbedder(with_backend(settings, "onnx-int8"), shared).backend.load()
    root = shared.directory / "exported-embedders"
    made = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    assert {p.parent.name.rsplit("-", 1)[0] for p in made
            if p.name == MANIFEST} >= {"onnx", "onnx-int8"}  # the fp32 export, quantised
    again = CachedEmbedder(with_backend(settings, "onnx-int8"), shared)
    again.backend.load()
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == made


class CopyingExecutor:
    """Runs each batch on a copy of the work, pickled as Ray sends it to a worker, and
    notes whether the export was whole when the copy got it."""

    def __init__(self, root: Path) -> None:
        self.root, self.found_whole = root, []

    def map_work(self, work, task, items, progress=None):
        def on_a_worker(inputs):
            self.found_whole.append(any((folder / MANIFEST).exists()
                                        for folder in self.root.glob("onnx-*")))
            return pickle.loads(pickle.dumps(work))(inputs)

        return [task(on_a_worker, item) for item in items]


def test_the_embedding_process_exports_before_a_worker_gets_a_batch(settings, tmp_path, cache,
                                                                    monkeypatch):
    """A copy of an exported backend sent to a worker finds the model already exported by
    the process that embeds, so no worker exports on its one CPU while the others wait on
    its lock; only batches that miss the cache are sent, and a fully cached run exports
    nothing."""
    onnx = with_backend(settings, "onnx")
    root = tmp_path / "exports"
    backend = ExportedBackend(onnx.path, onnx.sha256, BACKENDS["onnx"], root,
                              calibration_texts)
    executor = CopyingExecutor(root)
    texts = paragraphs(3)
    vectors = CachedEmbedder(onnx, cache, backend).encode(texts, executor)
    assert executor.found_whole == [True] and vectors.shape == (3, 384)
    assert backend._run is None  # this process exported the model but did not load it
    # in one process the export is checked (every file hashed) once, not again to load it
    checks = []
    monkeypatch.setattr(runtime, "exported", lambda *a: checks.append(a) or exported(*a))
    local = ExportedBackend(onnx.path, onnx.sha256, BACKENDS["onnx"], root, calibration_texts)
    np.testing.assert_array_equal(CachedEmbedder(onnx, CallCache(tmp_path / "fresh"),
                                                 local).encode(texts), vectors)
    assert len(checks) == 1
    shutil.rmtree(root)
    again = CachedEmbedder(onnx, cache, backend)
    np.testing.assert_array_equal(again.encode(texts, executor), vectors)
    assert executor.found_whole == [True] and not root.exists()


def test_each_backend_caches_its_own_vectors_and_torch_keeps_its_keys(settings, cache):
    texts = paragraphs(3)
    torch_vectors = CachedEmbedder(settings, cache).encode(texts)
    # torch's keys are the ones made before backends existed, so landed caches stay valid
    landed = request_key("embed", {"model_sha256": settings.sha256, "normalize": True,
                                   "text": texts[0]})
    assert cache.get_many([landed], "x")[0] is not None
    int8 = CachedEmbedder(with_backend(settings, "onnx-int8"), cache)
    int8_vectors = int8.encode(texts)
    assert int8.usage.calls == 3 and int8.usage.cache_hits == 0  # none of torch's reused
    assert not np.allclose(int8_vectors, torch_vectors, atol=1e-4)
    torch_again = CachedEmbedder(settings, cache)
    np.testing.assert_array_equal(torch_again.encode(texts), torch_vectors)
    assert torch_again.usage.calls == 0


def test_the_backend_joins_the_fingerprints_and_torch_adds_nothing(project):
    query = [{"name": "dense", "strategy": "naive", "top_k": 5}]

    def fingerprints(name: str, embedder: dict) -> dict[str, str]:
        spec = write_spec(project, name, models={"embedder": embedder}, query=query)
        return {s.name: s.fingerprint for s in api.open_session(spec).plan.steps}

    absent = fingerprints("absent", {"model": "all-MiniLM-L6-v2"})
    torch = fingerprints("torch", {"model": "all-MiniLM-L6-v2", "backend": "torch"})
    onnx = fingerprints("onnx", {"model": "all-MiniLM-L6-v2", "backend": "onnx"})
    int8 = fingerprints("int8", {"model": "all-MiniLM-L6-v2", "backend": "onnx-int8"})
    assert absent == torch
    assert onnx["chunks"] == absent["chunks"]  # tokens do not depend on the backend
    for step in ("dense", "retrieve.dense", "evaluate"):
        assert len({absent[step], onnx[step], int8[step]}) == 3, step


def test_a_backend_whose_runtime_is_missing_names_the_package(project, capsys, monkeypatch):
    spec = write_spec(project, models={"embedder": {"backend": "onnx-int8"}},
                      query=[{"name": "dense", "strategy": "naive", "top_k": 5}])
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as Python sees an absent package
    code = main(["run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("kgrag: error:") == 1 and "Traceback" not in err
    assert "'onnx-int8' needs the Python package onnxruntime" in err
    assert not (project / "outputs").exists() or not any((project / "outputs").rglob("*.lance"))


def test_a_failed_export_says_so_once_and_falls_back_to_nothing(settings, tmp_path, cache):
    broken = tmp_path / "minilm"
    shutil.copytree(settings.path, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:4096])  # a truncated download
    embedder = CachedEmbedder(EmbedderSettings("broken", broken, "b" * 64, backend="onnx"),
                              cache)
    with pytest.raises(KgragError, match="cannot export the embedder for backend 'onnx'"):
        embedder.encode(["Copenhagen is in Denmark."])
    root = cache.directory / "exported-embedders"
    assert [p.name for p in root.iterdir()] == [LOCK]  # no half-written artefact or scratch
    assert cache.stats().entries == 0 and embedder.usage.calls == 0  # no vector from elsewhere


def test_every_declared_backend_is_in_the_schema():
    from kgrag.spec.schema import SCHEMA

    assert SCHEMA["$defs"]["embedder"]["properties"]["backend"]["enum"] == list(BACKENDS)


def test_an_embedder_with_a_module_no_runtime_reproduces_is_refused(settings, tmp_path, cache):
    folder = tmp_path / "dense-head"
    shutil.copytree(settings.path, folder)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense",
                       "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    embedder = CachedEmbedder(EmbedderSettings("head", Path(folder), "c" * 64,
                                               backend="onnx"), cache)
    with pytest.raises(KgragError, match="runs Transformer, Pooling and Normalize only"):
        embedder.encode(["Copenhagen is in Denmark."])
