"""Sub-chunk splitting and the keyword–sub-chunk bipartite graph (KET-RAG Alg. 3, lines 14-19)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from kgrag.corpus import Tokenizer
from kgrag.errors import KgragError
from kgrag.graphs.bipartite import build_bipartite
from kgrag.graphs.subchunks import split_subchunks
from kgrag.models.registry import resolve_embedder

LONG = " ".join(
    f"Sentence number {i} mentions Copenhagen, Denmark and the Christmas Meeting of 1888."
    for i in range(12)
)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)


def chunks(*texts: str) -> pl.DataFrame:
    return pl.DataFrame({"chunk_id": [f"d:{i}" for i in range(len(texts))],
                         "doc_id": ["d"] * len(texts), "text": list(texts)})


@pytest.mark.parametrize("tau", [0, 1, 2, 3])
def test_each_chunk_gives_two_to_the_tau_exact_substrings(tokenizer, tau):
    parts = split_subchunks(chunks(LONG), tokenizer, tau)
    assert parts.height == 2**tau
    assert parts["subchunk_id"].to_list() == [f"d:0/{j}" for j in range(2**tau)]
    assert parts["j"].to_list() == list(range(2**tau))
    assert set(parts["chunk_id"]) == {"d:0"} and set(parts["doc_id"]) == {"d"}
    assert parts["n_tokens"].sum() == tokenizer.count(LONG)
    position = 0
    for text in parts["text"]:
        found = LONG.index(text, position)  # in order and exact
        assert found == 0 or LONG[found - 1] == " "  # cut at the start of a word
        position = found + len(text)
    assert position == len(LONG)


def test_parts_are_near_equal(tokenizer):
    sizes = split_subchunks(chunks(LONG), tokenizer, 3)["n_tokens"].to_numpy()
    ideal = tokenizer.count(LONG) / 8
    assert np.all(np.abs(sizes - ideal) <= ideal / 2)


def test_tau_zero_keeps_the_chunk(tokenizer):
    parts = split_subchunks(chunks(LONG, "Short one."), tokenizer, 0)
    assert parts["text"].to_list() == [LONG, "Short one."]


def test_short_chunks_give_fewer_non_empty_parts(tokenizer):
    parts = split_subchunks(chunks("Tiny chunk.", ""), tokenizer, 3)
    assert parts["text"].to_list() == ["Tiny", "chunk", "."]
    assert parts["n_tokens"].to_list() == [1, 1, 1]


def test_negative_tau_is_an_error(tokenizer):
    with pytest.raises(KgragError, match="τ"):
        split_subchunks(chunks(LONG), tokenizer, -1)


VECTORS = {
    "Paris is in France.": [1.0, 0.0, 0.0],
    "Paris hosts the Louvre, and Paris is big.": [0.0, 1.0, 0.0],
    "The Louvre is a museum.": [0.0, 0.0, 1.0],
    "France borders Spain.": [1.0, 1.0, 1.0],
}


class HandMade:
    """Looks the vectors up in VECTORS and records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(texts)
        return np.array([VECTORS[t] for t in texts], dtype=np.float32)


SUBCHUNKS = pl.DataFrame({
    "subchunk_id": ["a/0", "a/1", "b/0"],
    "text": ["Paris is in France. Paris hosts the Louvre, and Paris is big.",
             "The Louvre is a museum.",
             "Paris is in France. France borders Spain."],
})


def vector_of(bipartite, keyword: str) -> np.ndarray:
    row = bipartite.keywords.filter(pl.col("keyword") == keyword)
    return row["vector"].to_numpy()[0]


def test_keyword_vector_is_the_mean_of_its_sentence_occurrences():
    graph = build_bipartite(SUBCHUNKS, HandMade())
    # "Louvre": two sentences; the repeat of "Paris" in one sentence counts once, while
    # "Paris is in France." occurs in two sub-chunks and counts twice.
    np.testing.assert_allclose(vector_of(graph, "Louvre"), [0.0, 0.5, 0.5])
    np.testing.assert_allclose(vector_of(graph, "Paris"), [2 / 3, 1 / 3, 0.0])
    np.testing.assert_allclose(vector_of(graph, "France"), [1.0, 1 / 3, 1 / 3])
    np.testing.assert_allclose(vector_of(graph, "museum"), [0.0, 0.0, 1.0])
    assert graph.keywords.schema["vector"] == pl.Array(pl.Float32, 3)


def test_each_distinct_sentence_is_embedded_once_in_first_seen_order():
    embed = HandMade()
    build_bipartite(SUBCHUNKS, embed)
    assert embed.calls == [list(VECTORS)]


def test_edges_link_each_keyword_to_every_subchunk_containing_it():
    graph = build_bipartite(SUBCHUNKS, HandMade())
    linked = graph.edges.group_by("keyword").agg(pl.col("subchunk_id")).sort("keyword")
    assert dict(zip(linked["keyword"], linked["subchunk_id"].to_list())) == {
        "France": ["a/0", "b/0"], "Louvre": ["a/0", "a/1"], "Paris": ["a/0", "b/0"],
        "Spain": ["b/0"], "big": ["a/0"], "borders": ["b/0"], "hosts": ["a/0"],
        "museum": ["a/1"],
    }
    assert graph.keywords["keyword"].to_list() == sorted(linked["keyword"])
    assert graph.keywords["n_subchunks"].to_list() == [len(s) for s in linked["subchunk_id"]]


def test_sentences_frame_lists_every_occurrence():
    sentences = build_bipartite(SUBCHUNKS, HandMade()).sentences
    assert sentences.rows() == [
        ("a/0", 0, "Paris is in France."),
        ("a/0", 1, "Paris hosts the Louvre, and Paris is big."),
        ("a/1", 0, "The Louvre is a museum."),
        ("b/0", 0, "Paris is in France."),
        ("b/0", 1, "France borders Spain."),
    ]


def test_no_text_means_no_call_and_empty_frames():
    embed = HandMade()
    graph = build_bipartite(SUBCHUNKS.clear(), embed)
    assert embed.calls == []
    assert graph.keywords.height == graph.edges.height == graph.sentences.height == 0
    assert graph.keywords.columns == ["keyword", "n_subchunks", "vector"]


def test_a_wrong_number_of_vectors_is_an_error():
    with pytest.raises(KgragError, match="returned shape"):
        build_bipartite(SUBCHUNKS, lambda texts: np.zeros((1, 3)))
