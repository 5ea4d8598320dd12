"""Strategies ``knng`` (KNNG-RAG) and ``hybrid`` (Hybrid-RAG) on hand-made indexes.

Nine 10-token chunks; c1..c5 are the skeleton's (see the local search tests), c6..c9
only in the dense index. Dense cosines to the question rank
c1 .9, c6 .85, c2 .8, c7 .75, c3 .7, c8 .6, c5 .5, c9 .4, c4 .3.
The KNN graph links c1–c4, c1–c5 and c2–c3.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_retrieval_local_search import CHUNKS, QUESTION, units_of, write_skeleton

from kgrag.contents.dense import write_matrix
from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.registry import resolve_embedder
from kgrag.retrieval import STRATEGIES, Resources
from kgrag.retrieval.hybrid import DENSE_HEADER, HybridStrategy
from kgrag.retrieval.knng import KnngStrategy
from kgrag.retrieval.layout import share
from kgrag.retrieval.local_search import ENTITY_HEADER
from kgrag.store.vectors import VectorTable

ALL_CHUNKS = {**CHUNKS, **{f"c{i}": (f"d{i}", f"# Doc {i}\n{word} river flows past the {word} hill")
                           for i, word in zip(range(6, 10), ["upper", "lower", "inner", "outer"])}}
DENSE = {"c1": 0.9, "c6": 0.85, "c2": 0.8, "c7": 0.75, "c3": 0.7, "c8": 0.6, "c5": 0.5,
         "c9": 0.4, "c4": 0.3}
KNN = [("c1", "c4"), ("c1", "c5"), ("c2", "c3")]


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("indexes")
    dense, knn = root / "dense", root / "knn"
    dense.mkdir()
    knn.mkdir()
    sims = np.array(list(DENSE.values()))
    write_matrix(dense, VectorTable.create(
        dense, "chunks", list(DENSE),
        np.stack([sims, np.sqrt(1 - sims**2), 0 * sims, 0 * sims], axis=1)))
    pl.DataFrame({"source": [a for a, b in KNN] + [b for a, b in KNN],
                  "target": [b for a, b in KNN] + [a for a, b in KNN]}
                 ).write_parquet(knn / "knn.parquet")
    pl.DataFrame({"chunk_id": list(DENSE), "pagerank": [1 / 9] * 9, "core": [True] * 9}
                 ).write_parquet(knn / "core.parquet")
    return {"dense": dense, "knn": knn, "skeleton": write_skeleton(root / "skeleton", tokenizer)}


def load(cls, folders, tokenizer, **config):
    # what a spec fills in for these strategies (hybrid's θ default is 0.5)
    config = {"name": "x", "skeleton": "s", "top_k": None, "top_entities": 10, "theta": 0.5,
              **config}
    declared = next(d for d in STRATEGIES.values() if d.runs is cls)
    artefacts = {role: folders[role] for role in declared.needs(config)}
    return cls.load(config, artefacts, Resources(units_of(tokenizer, ALL_CHUNKS), tokenizer))


def test_registered():
    assert STRATEGIES["knng"].runs is KnngStrategy
    assert STRATEGIES["hybrid"].runs is HybridStrategy


def test_fixture_sizes(tokenizer):
    assert {tokenizer.count(c) for _, c in ALL_CHUNKS.values()} == {10}


# --- knng ---------------------------------------------------------------------------

def test_knng_needs_the_dense_index_and_a_knn_graph():
    assert STRATEGIES["knng"].inputs({"name": "x", "skeleton": "s"}) == {"dense": "dense",
                                                                   "knn": "core.s"}
    with pytest.raises(KgragError, match="skeleton"):
        STRATEGIES["knng"].inputs({"name": "x", "skeleton": None})


def test_knng_puts_each_seeds_neighbours_right_after_it(folders, tokenizer):
    knng = load(KnngStrategy, folders, tokenizer, top_k=3, budget_tokens=1000)
    # Seeds c1, c6, c2; c1's neighbours by cosine (c5 .5 before c4 .3); c6 has none;
    # c2's neighbour c3 (also a dense hit, but only seeds 1-3 are taken).
    assert knng.ranked(QUESTION) == ["c1", "c5", "c4", "c6", "c2", "c3"]
    context = knng.retrieve("q", QUESTION)
    assert context.unit_ids == ["c1", "c5", "c4", "c6", "c2", "c3"]
    assert context.doc_ids == ["d1", "d5", "d4", "d6", "d2", "d3"]


def test_knng_lists_each_chunk_once_and_fills_the_budget_greedily(folders, tokenizer):
    knng = load(KnngStrategy, folders, tokenizer, top_k=None, budget_tokens=35)
    # Every seed is listed, neighbours already listed are not repeated.
    assert knng.ranked(QUESTION) == ["c1", "c5", "c4", "c6", "c2", "c3", "c7", "c8", "c9"]
    context = knng.retrieve("q", QUESTION)
    assert context.unit_ids == ["c1", "c5", "c4"]
    assert context.text == "\n\n".join(ALL_CHUNKS[c][1] for c in ["c1", "c5", "c4"])
    assert context.tokens == tokenizer.count(context.text) == 30


def test_knng_refuses_a_graph_over_other_chunks(folders, tokenizer, tmp_path):
    pl.DataFrame({"source": ["c1"], "target": ["zz"]}).write_parquet(tmp_path / "knn.parquet")
    with pytest.raises(KgragError, match="zz"):
        load(KnngStrategy, {**folders, "knn": tmp_path}, tokenizer, top_k=None,
             budget_tokens=100)


# --- hybrid -------------------------------------------------------------------------

def test_hybrid_needs_the_dense_index_and_the_skeleton():
    assert STRATEGIES["hybrid"].inputs({"name": "x", "skeleton": "s", "theta": 0.5}) == {
        "dense": "dense", "skeleton": "skeleton.s"}
    with pytest.raises(KgragError, match="skeleton"):
        STRATEGIES["hybrid"].inputs({"name": "x", "skeleton": None, "theta": 0.5})
    with pytest.raises(KgragError, match="theta"):
        STRATEGIES["hybrid"].inputs({"name": "x", "skeleton": "s", "theta": -0.1})


def test_hybrid_splits_the_budget_and_gives_the_skeletons_leftover_to_dense(folders,
                                                                           tokenizer):
    # θ defaults to 0.5: the skeleton gets 60 of 120. Half of that, 30, holds the entity
    # header (18) and ALPHA's row (9); the sources get 60 − 27 = 33: header (11) and
    # ALPHA's chunks c2, c1. That is 58, so dense chunks get 120 − 58 = 62: their
    # header (12) and the next five dense hits that are not c1 or c2.
    hybrid = load(HybridStrategy, folders, tokenizer, top_entities=2, budget_tokens=120)
    local = hybrid.local.search(QUESTION, share(0.5, 120))
    assert (local.entities, local.unit_ids, local.tokens) == (["E1"], ["c2", "c1"], 58)
    context = hybrid.retrieve("q", QUESTION)
    assert context.unit_ids == ["c2", "c1", "c6", "c7", "c3", "c8", "c5"]
    assert context.text.startswith(ENTITY_HEADER)
    dense_part = context.text.split(f"\n\n{DENSE_HEADER}\n")[1]
    assert dense_part == "\n\n".join(ALL_CHUNKS[c][1] for c in ["c6", "c7", "c3", "c8", "c5"])
    assert context.tokens == tokenizer.count(context.text) == 120


def test_hybrid_at_theta_0_is_dense_only(folders, tokenizer):
    context = load(HybridStrategy, folders, tokenizer, theta=0.0, budget_tokens=42
                   ).retrieve("q", QUESTION)
    assert context.unit_ids == ["c1", "c6", "c2"]
    assert context.text.startswith(DENSE_HEADER) and context.tokens == 42


@pytest.mark.parametrize("theta", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("budget", [0, 15, 40, 75, 110, 200, 1000])
def test_hybrid_never_exceeds_the_budget_nor_repeats_a_chunk(folders, tokenizer, theta,
                                                             budget):
    hybrid = load(HybridStrategy, folders, tokenizer, theta=theta, budget_tokens=budget)
    context = hybrid.retrieve("q", QUESTION)
    assert context.tokens == tokenizer.count(context.text) <= budget
    assert len(set(context.unit_ids)) == len(context.unit_ids) == len(context.doc_ids)
    assert hybrid.local.search(QUESTION, share(theta, budget)).tokens <= share(theta, budget)
