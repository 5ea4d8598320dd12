"""Strategy ``ket`` (KET-RAG Alg. 4) on the hand-made skeleton plus a hand-made bipartite graph.

Every chunk c1..c5 of the skeleton has two sub-chunks of 20 tokens each; the
keyword section header costs 13. Cosines to the question (the first axis):

    keywords, best first:  apple → c3/0, c1/0      pear → c1/0, c2/1, c4/0
                           plum → c3/1             fig (last) → c5/1
    sub-chunks:  c5/1 .99  c2/1 .95  c1/0 .9  c3/0 .5  c4/0 .3  c1/1 .2  c2/0 .15
                 c3/1 .1   c4/1 .05  c5/0 0

So the pool fills c1/0, c3/0 (apple), c2/1, c4/0 (pear, c1/0 already in), c3/1,
c5/1: the sub-chunk nearest the question is reached only through the last keyword.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_retrieval_local_search import (
    CHUNKS,
    ENTITIES,
    QUESTION,
    RELATIONSHIPS,
    units_of,
    write_skeleton,
)

from kgrag.contents.dense import write_matrix
from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.registry import resolve_embedder
from kgrag.retrieval import STRATEGIES, Resources
from kgrag.retrieval.ket import KEYWORD_HEADER, KetStrategy
from kgrag.retrieval.layout import share
from kgrag.retrieval.local_search import ENTITY_HEADER
from kgrag.store.vectors import VectorTable

SIMILARITY = {"c5/1": 0.99, "c2/1": 0.95, "c1/0": 0.9, "c3/0": 0.5, "c4/0": 0.3,
              "c1/1": 0.2, "c2/0": 0.15, "c3/1": 0.1, "c4/1": 0.05, "c5/0": 0.0}
KEYWORDS = {"apple": ([0.5, 0.0, 0.0, 0.0], ["c3/0", "c1/0"]),
            "pear": ([0.8, 0.6, 0.0, 0.0], ["c1/0", "c2/1", "c4/0"]),
            "plum": ([0.3, 0.9, 0.0, 0.0], ["c3/1"]),
            "fig": ([-1.0, 0.0, 0.0, 0.0], ["c5/1"])}
WORDS = {"c1": "north", "c2": "south", "c3": "east", "c4": "west", "c5": "middle"}
FILLER = "of the long winding road that runs along the quiet river bank at dawn"
SUBCHUNKS = {f"{chunk}/{j}": (CHUNKS[chunk][0], f"# Doc {chunk[1]}\n{word} part {j} {FILLER}")
             for chunk, word in WORDS.items() for j in range(2)}
SIZE, KEYWORD_HEADER_TOKENS = 20, 13


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)


def write_bipartite(folder: Path, tokenizer: Tokenizer) -> Path:
    """The files of a ``bipartite.<name>`` step."""
    folder.mkdir(parents=True)
    ids = list(SUBCHUNKS)
    contexts = [SUBCHUNKS[s][1] for s in ids]
    pl.DataFrame({
        "chunk_id": ids, "parent_chunk_id": [s.split("/")[0] for s in ids],
        "doc_id": [SUBCHUNKS[s][0] for s in ids], "title": ["Doc"] * len(ids),
        "text": [c.split("\n", 1)[1] for c in contexts], "context": contexts,
        "context_tokens": tokenizer.count_many(contexts),
    }).write_parquet(folder / "subchunks.parquet")
    pl.DataFrame({"keyword": list(KEYWORDS),
                  "n_subchunks": [len(m) for _, m in KEYWORDS.values()]}
                 ).write_parquet(folder / "keywords.parquet")
    pl.DataFrame({"keyword": [k for k, (_, m) in KEYWORDS.items() for _ in m],
                  "subchunk_id": [s for _, m in KEYWORDS.values() for s in m]}
                 ).write_parquet(folder / "edges.parquet")
    VectorTable.create(folder, "keywords", list(KEYWORDS),
                       np.array([v for v, _ in KEYWORDS.values()], dtype=np.float32))
    sims = np.array([SIMILARITY[s] for s in ids])
    VectorTable.create(folder, "subchunks", ids,
                       np.stack([sims, np.sqrt(1 - sims**2), 0 * sims, 0 * sims], axis=1))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ket")
    return {"skeleton": write_skeleton(root / "skeleton", tokenizer),
            "bipartite": write_bipartite(root / "bipartite", tokenizer)}


def config(theta: float, budget: int, **kwargs) -> dict:
    return {"name": "k", "strategy": "ket", "budget_tokens": budget, "theta": theta,
            "skeleton": "s", "bipartite": "b", "top_entities": 10, **kwargs}


def strategy(folders, tokenizer, theta: float, budget: int) -> KetStrategy:
    """Loaded as the retrieve step does: only the artefacts ``needs`` names."""
    cfg = config(theta, budget)
    artefacts = {role: folders[role] for role in STRATEGIES["ket"].needs(cfg)}
    return KetStrategy.load(cfg, artefacts, Resources(units_of(tokenizer, CHUNKS), tokenizer))


def keyword_part(text: str) -> list[str]:
    """Sub-chunk ids in the keyword section, read back from the text."""
    if KEYWORD_HEADER not in text:
        return []
    rendered = {context: s for s, (_, context) in SUBCHUNKS.items()}
    return [rendered[c] for c in text.split(KEYWORD_HEADER + "\n")[1].split("\n\n")]


def test_registered():
    assert STRATEGIES["ket"].runs is KetStrategy


def test_fixture_sizes(tokenizer):
    assert {tokenizer.count(c) for _, c in SUBCHUNKS.values()} == {SIZE}
    assert tokenizer.count(KEYWORD_HEADER) == KEYWORD_HEADER_TOKENS


def test_needs_follow_theta():
    assert STRATEGIES["ket"].inputs(config(0.4, 100)) == {"skeleton": "skeleton.s",
                                                   "bipartite": "bipartite.b"}
    assert STRATEGIES["ket"].inputs(config(0.0, 100, skeleton=None)) == {"bipartite": "bipartite.b"}
    assert STRATEGIES["ket"].inputs(config(1.0, 100, bipartite=None)) == {"skeleton": "skeleton.s"}


@pytest.mark.parametrize(("theta", "missing"), [(0.4, "skeleton"), (1.0, "skeleton"),
                                                (0.4, "bipartite"), (0.0, "bipartite")])
def test_needs_refuses_a_missing_graph(theta, missing):
    with pytest.raises(KgragError, match=missing):
        STRATEGIES["ket"].inputs(config(theta, 100, **{missing: None}))


def test_needs_refuses_theta_outside_0_1():
    with pytest.raises(KgragError, match="theta"):
        STRATEGIES["ket"].inputs(config(1.5, 100))


def test_pool_stops_before_it_would_pass_the_limit(folders, tokenizer):
    keywords = strategy(folders, tokenizer, 0.0, 100).keywords
    similarity = keywords.subchunk_matrix @ QUESTION

    def pool(limit: int) -> list[str]:
        return [keywords.subchunk_ids[s] for s in keywords.pool(QUESTION, similarity, limit)]

    assert pool(1000) == ["c1/0", "c3/0", "c2/1", "c4/0", "c3/1", "c5/1"]
    assert pool(3 * SIZE) == ["c1/0", "c3/0", "c2/1"]  # exactly at the limit is kept
    assert pool(3 * SIZE - 1) == ["c1/0", "c3/0"]  # c2/1 would pass it: everything stops


def test_theta_0_is_keyword_rag_with_a_pool_of_2b(folders, tokenizer):
    # B = 40: the pool stops at 2B = 80 (four sub-chunks, before c5/1); re-sorted by
    # similarity, c2/1 comes first and is the only one that fits 40 (13 + 20).
    context = strategy(folders, tokenizer, 0.0, 40).retrieve("q", QUESTION)
    assert context.unit_ids == ["c2/1"] and context.doc_ids == ["d2"]
    assert context.text == f"{KEYWORD_HEADER}\n{SUBCHUNKS['c2/1'][1]}"
    assert context.tokens == tokenizer.count(context.text) == 33
    # With B = 200 the pool reaches the last keyword, whose c5/1 is the nearest of all.
    context = strategy(folders, tokenizer, 0.0, 200).retrieve("q", QUESTION)
    assert context.unit_ids == ["c5/1", "c2/1", "c1/0", "c3/0", "c4/0", "c3/1"]
    assert ENTITY_HEADER not in context.text


def test_theta_1_is_skeleton_only_over_whole_chunks(folders, tokenizer):
    ket = strategy(folders, tokenizer, 1.0, 300)
    assert ket.keywords is None
    context = ket.retrieve("q", QUESTION)
    assert KEYWORD_HEADER not in context.text and context.text.startswith(ENTITY_HEADER)
    expected = ket.skeleton.search(QUESTION, 300)
    assert context.unit_ids == expected.unit_ids and set(expected.unit_ids) <= set(CHUNKS)
    assert context.doc_ids == [CHUNKS[c][0] for c in context.unit_ids]
    assert context.tokens == tokenizer.count(context.text) <= 300


def test_leftover_keyword_budget_goes_to_the_skeleton(folders, tokenizer):
    # θ = 0.5 of 400: the keyword channel may take 200 but the whole pool is only
    # 13 + 6·20 = 133, so the skeleton gets 400 − 133 = 267, not 200.
    ket = strategy(folders, tokenizer, 0.5, 400)
    context = ket.retrieve("q", QUESTION)
    keyword_units = keyword_part(context.text)
    assert len(keyword_units) == 6
    skeleton = ket.skeleton.search(QUESTION, 400 - 133, frozenset(keyword_units))
    assert context.unit_ids == skeleton.unit_ids + keyword_units
    assert skeleton.tokens > share(0.5, 400)
    assert context.tokens == tokenizer.count(context.text) == skeleton.tokens + 133


def test_skeleton_first_rewired_to_subchunks_without_repeats(folders, tokenizer):
    context = strategy(folders, tokenizer, 0.5, 400).retrieve("q", QUESTION)
    keyword_units = keyword_part(context.text)
    skeleton_units = context.unit_ids[:len(context.unit_ids) - len(keyword_units)]
    # The skeleton's chunks become sub-chunks, minus those the keywords already took.
    assert skeleton_units == ["c1/1", "c2/0", "c4/1", "c5/0"]
    assert len(set(context.unit_ids)) == len(context.unit_ids) == len(SUBCHUNKS)
    assert context.text.index(ENTITY_HEADER) < context.text.index("-----Sources-----") \
        < context.text.index(KEYWORD_HEADER)
    assert context.doc_ids == [SUBCHUNKS[u][0] for u in context.unit_ids]


@pytest.mark.parametrize("theta", [0.0, 0.2, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("budget", [0, 20, 45, 90, 150, 250, 600])
def test_budget_is_never_exceeded(folders, tokenizer, theta, budget):
    context = strategy(folders, tokenizer, theta, budget).retrieve("q", QUESTION)
    assert context.tokens == tokenizer.count(context.text) <= budget
    assert len(context.doc_ids) == len(context.unit_ids) == len(set(context.unit_ids))
    assert len(keyword_part(context.text)) * SIZE <= share(1 - theta, budget)



def write_extraction(root: Path) -> dict[str, Path]:
    """The folders the ppr skeleton channel reads: the skeleton's extract step (entities
    with their source chunks, relationships), the dense chunk vectors, the chunk titles."""
    folders = {role: root / role for role in ("graph", "dense", "chunks")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    pl.DataFrame({"name": [e[1] for e in ENTITIES], "source_chunk_ids": [e[4] for e in ENTITIES]}
                 ).write_parquet(folders["graph"] / "entities.parquet")
    pl.DataFrame({"source": [r[1] for r in RELATIONSHIPS], "target": [r[2] for r in RELATIONSHIPS],
                  "strength": [r[4] for r in RELATIONSHIPS]}
                 ).write_parquet(folders["graph"] / "relationships.parquet")
    ids = list(CHUNKS)
    sims = np.linspace(0.1, 0.5, len(ids))  # c5 nearest: the tie-break and the fallback
    write_matrix(folders["dense"], VectorTable.create(
        folders["dense"], "chunks", ids,
        np.stack([sims, np.sqrt(1 - sims**2), 0 * sims, 0 * sims], axis=1)))
    pl.DataFrame({"chunk_id": ids, "title": [f"Doc {c[1]}" for c in ids]}
                 ).write_parquet(folders["chunks"] / "chunks.parquet")
    return folders


PPR = {"skeleton_search": "ppr", "damping": 0.5, "max_iterations": 50, "dense_seeds": 0.0,
       "dense_seed_chunks": 10, "titles": True, "specific_steps": True}


def ppr_strategy(folders, tokenizer, theta: float, budget: int) -> KetStrategy:
    cfg = config(theta, budget, **PPR)
    artefacts = {role: folders[role] for role in STRATEGIES["ket"].needs(cfg)}
    return KetStrategy.load(cfg, artefacts, Resources(units_of(tokenizer, CHUNKS), tokenizer))


@pytest.fixture(scope="module")
def ppr_folders(folders, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {**folders, **write_extraction(tmp_path_factory.mktemp("extraction"))}


def test_the_ppr_skeleton_channel_reads_the_extraction_not_the_skeleton():
    assert STRATEGIES["ket"].inputs(config(0.4, 100, **PPR)) == {
        "graph": "extract.s", "dense": "dense", "chunks": "chunks", "bipartite": "bipartite.b"}
    assert STRATEGIES["ket"].inputs(config(0.0, 100, **PPR)) == {"bipartite": "bipartite.b"}


def test_the_ppr_channel_ranks_the_skeleton_by_the_walk_within_the_theta_split(ppr_folders,
                                                                              tokenizer):
    question = "Where does Gamma meet Delta?"
    ket = ppr_strategy(ppr_folders, tokenizer, 0.5, 400)
    context = ket.retrieve(question, QUESTION)
    keyword_units = keyword_part(context.text)
    assert len(keyword_units) == 6  # the keyword channel is untouched: all of its pool
    ranked = ket.skeleton.ppr.scored(question, QUESTION)[0]
    expected = [u for chunk in ranked for u in ket.skeleton.children[chunk]
                if u not in keyword_units]
    skeleton_units = context.unit_ids[:len(context.unit_ids) - len(keyword_units)]
    assert skeleton_units == expected[:len(skeleton_units)] and skeleton_units
    # GAMMA and DELTA seed the walk: their chunks (c4, c5) lead the skeleton's sources
    assert ranked[:2] == ["c5", "c4"] and set(context.trace["seeds"]) == {"GAMMA", "DELTA"}
    assert ENTITY_HEADER not in context.text
    assert context.text.index("-----Sources-----") < context.text.index(KEYWORD_HEADER)
    assert context.tokens == tokenizer.count(context.text) <= 400


def test_the_ppr_channel_alone_falls_back_to_dense_for_a_question_naming_nothing(ppr_folders,
                                                                                  tokenizer):
    context = ppr_strategy(ppr_folders, tokenizer, 1.0, 60).retrieve("Why?", QUESTION)
    assert context.unit_ids == ["c5", "c4", "c3", "c2"] and context.trace["seeds"] == {}  # dense
    assert "fallback" in context.trace and KEYWORD_HEADER not in context.text
