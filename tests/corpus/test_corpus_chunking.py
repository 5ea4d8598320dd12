"""Chunking cuts exact, size-bounded, overlapping windows, fast enough for real corpora."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import polars as pl
import pytest

from kgrag.corpus import Tokenizer, chunk_documents, chunking, load_corpus
from kgrag.corpus.sentences import split_sentences
from kgrag.errors import KgragError


def documents(*texts: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "doc_id": [f"doc{i}" for i in range(len(texts))],
            "title": [f"t{i}" for i in range(len(texts))],
            "text": list(texts),
        }
    )


@pytest.fixture(scope="module")
def musique_documents(repo_root: Path) -> pl.DataFrame:
    cfg = {
        "dataset": "musique",
        "path": "../shared/data/musique_200.jsonl",
        "limit": None,
        "questions": None,
        "fields": {},
    }
    return load_corpus(cfg, repo_root).documents


def test_full_musique_corpus(musique_documents: pl.DataFrame, tokenizer: Tokenizer):
    size, overlap = 64, 16
    began = time.perf_counter()
    chunks = chunk_documents(musique_documents, tokenizer, size=size, overlap=overlap)
    elapsed = time.perf_counter() - began
    assert elapsed < 10, f"chunking {musique_documents.height} documents took {elapsed:.1f}s"

    texts = dict(zip(musique_documents["doc_id"], musique_documents["text"]))
    token_counts = dict(zip(texts, tokenizer.count_many(list(texts.values()))))
    assert chunks["chunk_id"].n_unique() == chunks.height
    assert set(chunks["doc_id"]) == set(texts)
    assert chunks["n_tokens"].max() <= size
    assert chunks["n_tokens"].to_list() == tokenizer.count_many(chunks["text"].to_list())

    multi = 0
    for doc_id, group in chunks.group_by("doc_id", maintain_order=True):
        text = texts[doc_id[0]]
        rows = list(group.iter_rows(named=True))
        assert [row["idx"] for row in rows] == list(range(len(rows)))
        assert all(row["chunk_id"] == f"{row['doc_id']}:{row['idx']}" for row in rows)
        assert all(text[row["start"] : row["end"]] == row["text"] for row in rows)
        assert rows[0]["start"] == len(text) - len(text.lstrip())
        assert rows[-1]["end"] == len(text.rstrip())
        if token_counts[doc_id[0]] <= size:
            assert len(rows) == 1
            continue
        multi += 1
        offsets = tokenizer.offsets(text)
        for previous, current in itertools.pairwise(rows):
            assert previous["start"] < current["start"] < previous["end"] < current["end"]
            shared = sum(1 for start, _ in offsets if current["start"] <= start < previous["end"])
            assert overlap <= shared <= overlap + size // 4
    assert multi > 100


def test_windows_end_at_sentence_ends(tokenizer: Tokenizer):
    text = " ".join(f"Sentence number {i} is short." for i in range(60))
    chunks = chunk_documents(documents(text), tokenizer, size=32, overlap=0)
    sentence_ends = {end for _, end in split_sentences(text)}
    assert chunks.height > 5
    assert all(end in sentence_ends for end in chunks["end"])
    assert " ".join(chunks["text"]) == text  # no overlap: the chunks tile the text


def test_short_document_is_one_chunk(tokenizer: Tokenizer):
    text = "  Port Blair is the capital of the Andaman and Nicobar Islands.\n"
    chunks = chunk_documents(documents(text, ""), tokenizer, size=256, overlap=32)
    assert chunks.select("chunk_id", "idx", "text", "start").row(0) == (
        "doc0:0",
        0,
        text.strip(),
        2,
    )
    assert chunks.height == 1  # the empty document has no tokens, hence no chunk
    assert chunks["n_tokens"][0] == tokenizer.count(text)


def test_unbroken_text_is_still_cut_within_size(tokenizer: Tokenizer):
    text = "x" * 5 + "-" * 400
    chunks = chunk_documents(documents(text), tokenizer, size=50, overlap=10)
    assert chunks["n_tokens"].max() <= 50
    assert chunks["end"][-1] == len(text)
    assert all(text[s:e] == t for s, e, t in chunks.select("start", "end", "text").iter_rows())


@pytest.mark.parametrize("overlap", [64, 100, -1])
def test_bad_overlap(tokenizer: Tokenizer, overlap: int):
    with pytest.raises(KgragError, match="overlap"):
        chunk_documents(documents("Some text."), tokenizer, size=64, overlap=overlap)


def test_empty_frame(tokenizer: Tokenizer):
    chunks = chunk_documents(documents(), tokenizer, size=64, overlap=8)
    assert chunks.is_empty()
    assert chunks.columns == ["chunk_id", "doc_id", "idx", "text", "n_tokens", "start", "end"]


def test_a_large_corpus_is_tokenised_in_bounded_batches(musique_documents: pl.DataFrame,
                                                        tokenizer: Tokenizer,
                                                        monkeypatch: pytest.MonkeyPatch):
    """Every document's token offsets at once are tens of KB per chunk of Python tuples
    (31 KB at 10,000 chunks, docs/scale.md): the chunker holds one batch's, and cuts
    the same chunks as it did holding all. Was: one call for the whole corpus."""
    whole = chunk_documents(musique_documents, tokenizer, size=64, overlap=16)
    asked: list[int] = []
    offsets_many = tokenizer.offsets_many

    def counted(texts: list[str]) -> list[list[tuple[int, int]]]:
        asked.append(len(texts))
        return offsets_many(texts)

    monkeypatch.setattr(tokenizer, "offsets_many", counted)
    monkeypatch.setattr(chunking, "TOKENIZE_BATCH", 500)
    batched = chunk_documents(musique_documents, tokenizer, size=64, overlap=16)
    assert max(asked) == 500 and sum(asked) == musique_documents.height
    assert batched.equals(whole)
