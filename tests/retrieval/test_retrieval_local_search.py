"""GraphRAG local search on a KG skeleton (KET-RAG Alg. 2), on a hand-made skeleton.

The helpers here also build the skeleton folders of the ``ket`` and ``hybrid`` tests.

The world: the question vector is the first axis. Entity cosines rank ALPHA, BETA,
GAMMA, DELTA, EPSILON; with two seed entities, ALPHA and BETA are the seeds.

    R2  ALPHA–BETA    strength 2   joins two seeds          → first
    R1  ALPHA–GAMMA   strength 9   one seed                 → second (id order: R1 < R3 < R10)
    R3  BETA–DELTA    strength 9   one seed                 → third
    R10 GAMMA–BETA    strength 9   one seed                 → fourth
    R4  GAMMA–DELTA   strength 10  no seed                  → never

Text units: ALPHA lists chunks c2, c1 and BETA lists c1, c3, c4. ALPHA's chunks come
first (seed rank); c1 carries R1 and R2 (both touching ALPHA) so it precedes c2; c1
is already taken when BETA comes; c4 carries R3 and R10 so it precedes c3.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.registry import resolve_embedder
from kgrag.retrieval.layout import Layout, share
from kgrag.retrieval.local_search import (
    ENTITY_HEADER,
    RELATIONSHIP_HEADER,
    LocalSearch,
    natural_key,
)
from kgrag.retrieval.units import Units
from kgrag.store.vectors import VectorTable

QUESTION = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)

# (entity_id, name, type, description, chunk_ids, vector)
ENTITIES = [
    ("E1", "ALPHA", "concept", "first letter", ["c2", "c1"], [1.0, 0.1, 0.0, 0.0]),
    ("E2", "BETA", "concept", "second letter", ["c1", "c3", "c4"], [0.9, 0.4, 0.0, 0.0]),
    ("E3", "GAMMA", "concept", "third letter", ["c4"], [0.5, 0.8, 0.0, 0.0]),
    ("E4", "DELTA", "concept", "fourth letter", ["c5"], [0.0, 1.0, 0.0, 0.0]),
    ("E5", "EPSILON", "concept", "fifth letter", ["c5"], [-1.0, 0.0, 0.0, 0.0]),
]
# (relationship_id, source, target, description, strength, chunk_ids)
RELATIONSHIPS = [
    ("R1", "ALPHA", "GAMMA", "alpha precedes gamma", 9.0, ["c1"]),
    ("R2", "ALPHA", "BETA", "alpha precedes beta", 2.0, ["c1"]),
    ("R3", "BETA", "DELTA", "beta precedes delta", 9.0, ["c4"]),
    ("R4", "GAMMA", "DELTA", "gamma precedes delta", 10.0, ["c5"]),
    ("R10", "GAMMA", "BETA", "gamma follows beta", 9.0, ["c4"]),
]
CHUNKS = {f"c{i}": (f"d{i}", f"# Doc {i}\n{word} river flows past the {word} hill")
          for i, word in enumerate(["", "north", "south", "east", "west", "middle"]) if i}


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)


def units_of(tokenizer: Tokenizer, contexts: dict[str, tuple[str, str]]) -> Units:
    """Units from ``{unit id: (doc id, context)}``, counted with the real tokenizer."""
    return Units({u: text for u, (_, text) in contexts.items()},
                 {u: tokenizer.count(text) for u, (_, text) in contexts.items()},
                 {u: doc for u, (doc, _) in contexts.items()})


def write_skeleton(folder: Path, tokenizer: Tokenizer, entities: list[tuple] = ENTITIES,
                   relationships: list[tuple] = RELATIONSHIPS) -> Path:
    """The files of a ``skeleton.<name>`` step, with rows rendered and counted."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f"{e}|{n}|{t}|{d}" for e, n, t, d, _, _ in entities]
    pl.DataFrame({
        "entity_id": [e[0] for e in entities], "name": [e[1] for e in entities],
        "type": [e[2] for e in entities], "description": [e[3] for e in entities],
        "chunk_ids": [e[4] for e in entities], "row": rows,
        "row_tokens": tokenizer.count_many(rows),
    }).write_parquet(folder / "entities.parquet")
    rows = [f"{r}|{s}|{t}|{d}|{w}" for r, s, t, d, w, _ in relationships]
    pl.DataFrame({
        "relationship_id": [r[0] for r in relationships],
        "source": [r[1] for r in relationships], "target": [r[2] for r in relationships],
        "description": [r[3] for r in relationships],
        "strength": [r[4] for r in relationships], "chunk_ids": [r[5] for r in relationships],
        "row": rows, "row_tokens": tokenizer.count_many(rows),
    }, schema_overrides={"chunk_ids": pl.List(pl.String)}).write_parquet(
        folder / "relationships.parquet")
    vectors = np.array([e[5] for e in entities], dtype=np.float32)
    VectorTable.create(folder, "entities", [e[0] for e in entities],
                       vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return folder


@pytest.fixture(scope="module")
def skeleton(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    return write_skeleton(tmp_path_factory.mktemp("skeleton"), tokenizer)


def local(skeleton: Path, tokenizer: Tokenizer, **kwargs) -> LocalSearch:
    kwargs.setdefault("top_entities", 2)
    return LocalSearch.load(skeleton, units_of(tokenizer, CHUNKS), Layout(tokenizer), **kwargs)


def test_seeds_relationships_and_text_units_in_rank_order(skeleton, tokenizer):
    found = local(skeleton, tokenizer).search(QUESTION, 10_000)
    assert found.entities == ["E1", "E2"]
    # Two seeds joined first despite the lowest strength; then strength 9 by natural id.
    assert found.relationships == ["R2", "R1", "R3", "R10"]
    # ALPHA's chunks before BETA's; within a seed, more selected relationships first.
    assert found.unit_ids == ["c1", "c2", "c4", "c3"]


def test_context_text_layout_and_exact_token_count(skeleton, tokenizer):
    search = local(skeleton, tokenizer)
    found = search.search(QUESTION, 10_000)
    text, tokens = search.layout.render(found.sections)
    assert text == (
        f"{ENTITY_HEADER}\nE1|ALPHA|concept|first letter\nE2|BETA|concept|second letter\n\n"
        f"{RELATIONSHIP_HEADER}\nR2|ALPHA|BETA|alpha precedes beta|2.0\n"
        "R1|ALPHA|GAMMA|alpha precedes gamma|9.0\nR3|BETA|DELTA|beta precedes delta|9.0\n"
        "R10|GAMMA|BETA|gamma follows beta|9.0\n\n"
        "-----Sources-----\n" + "\n\n".join(CHUNKS[c][1] for c in ["c1", "c2", "c4", "c3"]))
    assert tokens == tokenizer.count(text) == found.tokens


@pytest.mark.parametrize("budget", [0, 10, 25, 40, 60, 80, 100, 130, 160, 200])
def test_budget_is_never_exceeded_and_rows_take_at_most_half(skeleton, tokenizer, budget):
    search = local(skeleton, tokenizer, top_entities=5)
    found = search.search(QUESTION, budget)
    text, tokens = search.layout.render(found.sections)
    assert tokens == tokenizer.count(text) <= found.tokens <= budget
    _, row_tokens = search.layout.render(found.sections[:2])
    assert row_tokens <= budget // 2


def test_text_units_get_what_the_rows_leave(skeleton, tokenizer):
    # Budget 80, half 40: the entity header (18) and two rows (9 + 9) take 36 and no
    # relationship fits (header 20 + row 16). Text units then get 80 - 36 = 44: their
    # header (11) and three 10-token chunks; with only the half (40) two would fit. No
    # relationship is selected, so none is carried and each entity's chunk order holds.
    found = local(skeleton, tokenizer).search(QUESTION, 80)
    assert found.entities == ["E1", "E2"] and found.relationships == []
    assert found.unit_ids == ["c2", "c1", "c3"]
    assert found.tokens == 36 + 41


def test_rewiring_replaces_each_chunk_by_all_its_subchunks_in_index_order(skeleton, tokenizer):
    ids = ["c1/10", "c1/2", "c1/0", "c2/0", "c3/0", "c4/1", "c4/0", "c5/0"]
    subchunks = units_of(tokenizer, {u: (CHUNKS[u.split("/")[0]][0], f"# Doc\npart {u}")
                                     for u in ids})
    search = LocalSearch.load(skeleton, subchunks, Layout(tokenizer), top_entities=2,
                              parent_of={u: u.split("/")[0] for u in ids})
    found = search.search(QUESTION, 10_000)
    assert found.unit_ids == ["c1/0", "c1/2", "c1/10", "c2/0", "c4/0", "c4/1", "c3/0"]


def test_excluded_units_are_skipped(skeleton, tokenizer):
    found = local(skeleton, tokenizer).search(QUESTION, 10_000, frozenset({"c1", "c4"}))
    assert found.unit_ids == ["c2", "c3"]


def test_a_skeleton_citing_unknown_chunks_is_refused(skeleton, tokenizer):
    with pytest.raises(KgragError, match="c5"):
        LocalSearch.load(skeleton, units_of(tokenizer, {c: CHUNKS[c] for c in ["c1", "c2"]}),
                         Layout(tokenizer), parent_of={"c1/0": "c1", "c2/0": "c2",
                                                       "c3/0": "c3", "c4/0": "c4"})


def test_helpers():
    assert sorted(["R10", "R2", "R1"], key=natural_key) == ["R1", "R2", "R10"]
    assert share(1 - 0.9, 1000) == 100 and share(0.5, 7) == 3
