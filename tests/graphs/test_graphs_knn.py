"""The KNN chunk graph and core-chunk selection (KET-RAG Alg. 3, lines 2-8)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from kgrag.corpus import Tokenizer, chunk_documents, load_corpus
from kgrag.corpus.keywords import keywords
from kgrag.errors import KgragError
from kgrag.graphs import knn
from kgrag.graphs.core import pagerank, select_core
from kgrag.graphs.knn import knn_graph
from kgrag.models.registry import resolve_embedder

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

# Chunk 0 shares 3 keywords with chunk 2 and 1 with chunk 1; chunk 3 shares none.
TEXTS = ["alpha beta gamma delta", "alpha zeta", "alpha beta gamma", "omega"]
VECTORS = np.array([[1.0, 0.0], [0.6, 0.8], [0.99, 0.14], [0.8, 0.6]], dtype=np.float32)


def edges(graph: sp.csr_matrix) -> set[tuple[int, int]]:
    rows, cols = graph.nonzero()
    return {(int(i), int(j)) for i, j in zip(rows, cols) if i < j}


def test_hand_checked_graph_with_one_lexical_and_one_semantic_neighbour():
    # 0: lexical 2 (3 shared), semantic 3 (2 is nearer but already taken lexically)
    # 1: lexical 0 (tie with 2 at 1 shared, lower index wins), semantic 3
    # 2: lexical 0, semantic 3 (0 taken)      3: no lexical neighbour, semantic 1
    graph = knn_graph(TEXTS, VECTORS, 2)
    assert edges(graph) == {(0, 2), (0, 3), (0, 1), (1, 3), (2, 3)}
    assert graph.dtype == np.float64 and set(graph.data) == {1.0}


def test_semantic_neighbour_is_the_most_similar_vector_when_no_keywords_are_shared():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1], [0.1, 0.9]], dtype=np.float32)
    graph = knn_graph(["", "", "", ""], vectors, 2)
    assert edges(graph) == {(0, 2), (1, 3)}


def test_scale_of_vectors_does_not_matter():
    a = knn_graph(TEXTS, VECTORS, 2)
    b = knn_graph(TEXTS, VECTORS * np.array([[3.0], [0.5], [7.0], [1.0]], dtype=np.float32), 2)
    assert edges(a) == edges(b)


def test_ties_go_to_the_lower_index():
    graph = knn_graph(["same words"] * 4, np.ones((4, 3), dtype=np.float32), 2)
    # lexical: 0→1, others→0; semantic (excluding self and the lexical pick): 0→2, 1→2, 2→1, 3→1
    assert edges(graph) == {(0, 1), (0, 2), (1, 2), (0, 3), (1, 3)}


def reference_out_edges(texts, vectors, k):
    """Brute force Alg. 3 with Python loops, for comparison."""
    sets = [set(keywords(t)) for t in texts]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    out = set()
    for i in range(len(texts)):
        others = [j for j in range(len(texts)) if j != i]
        lexical = sorted((j for j in others if sets[i] & sets[j]),
                         key=lambda j: (-len(sets[i] & sets[j]), j))[: k // 2]
        semantic = sorted((j for j in others if j not in lexical),
                          key=lambda j: (-float(unit[i] @ unit[j]), j))[: k // 2]
        out |= {(min(i, j), max(i, j)) for j in lexical + semantic}
    return out


@pytest.mark.parametrize("k", [2, 4, 10])
def test_blocks_match_brute_force_and_graph_is_symmetric(monkeypatch, k):
    rng = np.random.default_rng(7)
    words = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "ibis", "jay"]
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 5))) for _ in range(40)]
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    monkeypatch.setattr(knn, "_BLOCK_ELEMENTS", 100)  # blocks of 2 rows
    graph = knn_graph(texts, vectors, k)
    assert edges(graph) == reference_out_edges(texts, vectors, k)
    assert (graph != graph.T).nnz == 0
    assert graph.diagonal().sum() == 0
    assert np.diff(graph.indptr).min() >= k // 2


def test_tiny_inputs():
    assert knn_graph(["one"], np.ones((1, 2)), 2).nnz == 0
    assert edges(knn_graph(["a b", "c d"], np.eye(2), 10)) == {(0, 1)}


@pytest.mark.parametrize("k", [0, 1, 3])
def test_odd_or_small_k_is_an_error(k):
    with pytest.raises(KgragError, match="even K"):
        knn_graph(TEXTS, VECTORS, k)


def test_one_vector_per_text_is_required():
    with pytest.raises(KgragError, match="one vector per chunk"):
        knn_graph(TEXTS, VECTORS[:3], 2)


def star(n: int) -> sp.csr_matrix:
    hub = sp.coo_matrix((np.ones(n - 1), (np.zeros(n - 1, dtype=int), np.arange(1, n))),
                        shape=(n, n))
    return (hub + hub.T).tocsr()


def test_pagerank_on_a_star_picks_the_hub():
    scores = pagerank(star(10))
    assert scores.argmax() == 0 and scores.sum() == pytest.approx(1.0)
    assert select_core(star(10), 0.1).tolist() == [0]


def test_pagerank_matches_networkx_including_dangling_nodes():
    rng = np.random.default_rng(3)
    graph = sp.random(60, 60, density=0.05, random_state=rng, format="csr")
    graph = ((graph + graph.T) > 0).astype(float)
    graph.setdiag(0)
    graph = sp.block_diag([graph, sp.csr_matrix((3, 3))], format="csr")  # 3 isolated nodes
    graph.eliminate_zeros()
    reference = nx.pagerank(nx.from_scipy_sparse_array(graph), alpha=0.85, tol=1e-12)
    np.testing.assert_allclose(pagerank(graph), [reference[i] for i in range(63)], atol=1e-9)


def test_pagerank_of_an_empty_graph():
    assert pagerank(sp.csr_matrix((0, 0))).shape == (0,)


def test_pagerank_core_size_is_the_ceiling_of_beta_n():
    ring = star(10)
    assert len(select_core(ring, 0.2)) == 2
    assert len(select_core(ring, 0.7)) == 7  # 0.7 * 10 is 7.000000000000001 in floats
    assert len(select_core(ring, 0.01)) == 1
    assert select_core(ring, 1.0).tolist() == list(range(10))


def test_equal_pagerank_goes_to_the_lower_index():
    assert select_core(star(10), 0.3).tolist() == [0, 1, 2]


@pytest.mark.parametrize("beta", [-0.1, 1.5])
def test_beta_out_of_range_is_an_error(beta):
    with pytest.raises(KgragError, match=r"must be in \[0, 1\]"):
        select_core(star(10), beta)


def test_empty_skeleton_is_an_error():
    with pytest.raises(KgragError, match="empty skeleton: β=0.0 selects no chunk of 10"):
        select_core(star(10), 0.0)


def test_uniform_sample_is_seeded():
    graph = star(50)
    first = select_core(graph, 0.2, "uniform", seed=1)
    assert len(first) == 10 and np.all(np.diff(first) > 0)
    np.testing.assert_array_equal(first, select_core(graph, 0.2, "uniform", seed=1))
    assert not np.array_equal(first, select_core(graph, 0.2, "uniform", seed=2))


def test_unknown_method_is_an_error():
    with pytest.raises(KgragError, match="unknown core selection method"):
        select_core(star(5), 0.5, "degree")


def test_full_musique_corpus_gives_a_symmetric_graph():
    corpus = load_corpus(
        {"dataset": "musique", "path": "musique_200.jsonl", "limit": None, "questions": None,
         "fields": {"id": "id", "title": "title", "text": "text"}},
        SHARED_DATA,
    )
    tokenizer = Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)
    chunks = chunk_documents(corpus.documents, tokenizer, 256, 32)
    vectors = np.random.default_rng(0).normal(size=(chunks.height, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    graph = knn_graph(chunks["text"].to_list(), vectors, 2)
    n = chunks.height
    assert n > 3000 and graph.shape == (n, n)
    assert (graph != graph.T).nnz == 0 and graph.diagonal().sum() == 0
    assert np.diff(graph.indptr).min() >= 1
    core = select_core(graph, 0.8)
    assert len(core) == -(-4 * n // 5)
