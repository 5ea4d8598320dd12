"""The tokenizer wrapper counts content tokens of the bundled MiniLM tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgrag.corpus import Tokenizer
from kgrag.corpus import tokenizer as tokenizer_module
from kgrag.errors import KgragError


def test_count_has_no_special_tokens_truncation_or_padding(tokenizer: Tokenizer):
    assert tokenizer.count("") == 0
    assert tokenizer.count("Hello, world!") == 4
    assert tokenizer.count("word " * 300) == 300  # the shipped tokenizer.json truncates at 128


def test_count_many_matches_count(tokenizer: Tokenizer):
    texts = ["Port Blair is the capital.", "", "Unbelievably tokenised text", "a " * 200]
    assert tokenizer.count_many(texts) == [tokenizer.count(text) for text in texts]


def test_offsets_point_into_the_original_text(tokenizer: Tokenizer):
    text = "Hello, Wörld!"
    assert tokenizer.offsets(text) == [(0, 5), (5, 6), (7, 12), (12, 13)]
    assert tokenizer.offsets_many([text, ""]) == [tokenizer.offsets(text), []]


def test_from_dir_without_tokenizer_json(tmp_path: Path):
    with pytest.raises(KgragError, match="no tokenizer.json"):
        Tokenizer.from_dir(tmp_path)


def test_from_dir_with_broken_tokenizer_json(tmp_path: Path):
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(KgragError, match="cannot read tokenizer"):
        Tokenizer.from_dir(tmp_path)


def test_count_many_encodes_a_bounded_batch_at_a_time(tokenizer: Tokenizer,
                                                      monkeypatch: pytest.MonkeyPatch):
    """A million texts' encodings at once would hold every token's id, string and
    offsets; counts come ``BATCH`` texts a call, the same as one by one."""
    texts = [f"text number {n} " * n for n in range(7)]
    one_by_one = [tokenizer.count(t) for t in texts]
    backend, calls = tokenizer._backend, []

    class Counting:
        def encode_batch(self, batch: list[str], **options: bool) -> list:
            calls.append(len(batch))
            return backend.encode_batch(batch, **options)

    monkeypatch.setattr(tokenizer_module, "BATCH", 3)
    monkeypatch.setattr(tokenizer, "_backend", Counting())
    assert tokenizer.count_many(texts) == one_by_one
    assert calls == [3, 3, 1]
