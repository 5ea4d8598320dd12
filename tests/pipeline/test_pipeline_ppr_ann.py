"""Strategy ppr over a dense artefact with an ANN index, on a real graph: spaCy's entities
of twelve real 2Wiki questions' paragraphs, searched through a real LanceDB HNSW index
(forced by a low ``min_rows``) beside the same spec's flat run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgrag.contents.dense import MatrixRows
from kgrag.retrieval.dense_scores import FIRST_SEARCH, Flat, Nearest
from kgrag.retrieval.ppr import PprStrategy
from kgrag.retrieval.walked import WalkMemo
from kgrag.steps.retrieve import load_strategy
from tests.conftest import SHARED_DATA, write_spec
from tests.standin import RuleLLM, open_with, run_with

QUESTIONS = 12
BUDGETS = [600, 100000]  # a context, and one past the corpus: every chunk
QUERY = [{"name": "ppr", "strategy": "ppr", "entities": "ents", "walk": "push",
          "budget_tokens": BUDGETS},
         {"name": "dense", "strategy": "naive"}]
ANN = {"ann": {"min_rows": 50, "ef": 200}}  # exact enough on a table of a hundred rows


@pytest.fixture
def written(project: Path) -> tuple[Path, Path]:
    """The flat spec and the same spec with an ANN index."""
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        lines = [line for line in handle if '"context"' in line][:QUESTIONS]
    (project / "2wiki.jsonl").write_text("".join(lines))
    common = {"corpus": {"dataset": "2wiki", "path": "../2wiki.jsonl"},
              "extraction": {"method": "nlp"}, "graphs": [{"name": "ents", "kind": "entities"}],
              "query": QUERY, "answer": {"questions": 0}, "evaluate": {"metrics": ["coverage"]}}
    return write_spec(project, "flat", **common), write_spec(project, "ann", dense_index=ANN,
                                                             **common)


@pytest.fixture
def specs(written: tuple[Path, Path]) -> tuple[Path, Path]:
    """``written``, both run."""
    for spec in written:
        run_with(spec, RuleLLM())
    return written


def ppr_strategies(spec: Path) -> tuple[dict[int, PprStrategy], list[str], np.ndarray]:
    """The spec's ppr strategy at each budget as the run loaded it, the questions and
    their vectors."""
    session = open_with(spec, RuleLLM())
    found, embedder = {}, None
    for step in session.plan.steps:
        if step.kind == "retrieve" and step.config["strategy"]["strategy"] == "ppr":
            inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
            strategy = load_strategy(step.config, inputs, session.models)
            found[step.config["strategy"]["budget_tokens"]] = strategy
            embedder = session.models.embedder_of(step.config["embedder"])
    assert embedder is not None and sorted(found) == BUDGETS
    with (spec.parent.parent / "2wiki.jsonl").open() as handle:
        questions = [json.loads(line)["question"] for line in handle]
    return found, questions, embedder.encode(questions)


def counting(matrix: np.ndarray | MatrixRows) -> tuple[np.ndarray | MatrixRows, list[int]]:
    """``matrix`` as one that records the rows of every product taken with it: mapped
    (a flat scan's), or read by rows (a search over the index)."""
    rows: list[int] = []

    class Products(np.ndarray):
        def __matmul__(self, other: np.ndarray) -> np.ndarray:
            rows.append(len(self))
            return np.asarray(self) @ other

    class CountedRows(MatrixRows):
        def dot(self, positions: np.ndarray, vector: np.ndarray) -> np.ndarray:
            rows.append(len(positions))
            return super().dot(positions, vector)

    if isinstance(matrix, MatrixRows):
        return CountedRows(Path(matrix.file.name)), rows
    return matrix.view(Products), rows


def test_with_an_index_ppr_finds_the_flat_runs_chunks_and_scans_no_question_whole(
        specs: tuple[Path, Path]) -> None:
    flat, questions, vectors = ppr_strategies(specs[0])
    ann, _, _ = ppr_strategies(specs[1])
    chunks = len(flat[600].search.graph.chunk_ids)
    assert chunks > 100  # the index is searched for FIRST_SEARCH of them, not all
    assert flat[600].search.index is None
    # a flat scan maps the matrix; a search over the index reads the rows it needs
    assert isinstance(flat[600].search.chunk_matrix, np.ndarray)
    assert isinstance(ann[600].search.chunk_matrix, MatrixRows)
    assert ann[600].search.index is not None and ann[600].search.index.ann["index"] == (
        "ivf_hnsw_sq")
    recorded = {}
    for name, strategies in (("flat", flat), ("ann", ann)):
        search = strategies[600].search
        assert strategies[100000].search is search  # the budgets share one search
        search.walked = WalkMemo()
        search.chunk_matrix, rows = counting(search.chunk_matrix)
        for budget, strategy in strategies.items():
            contexts = [strategy.retrieve(q, v).unit_ids for q, v in zip(questions, vectors)]
            recorded[name, budget] = contexts
            recorded[name, budget, "rows"] = rows[:]
            rows.clear()
        walks = [search.question_walk(q, v) for q, v in zip(questions, vectors)]
        assert all(walk.mass is not None for walk in walks)  # each question names an entity
        recorded[name, "walks"] = walks
    # flat: one product with every chunk per question (the walk, shared by both budgets);
    # with the index none: only the rows searched and those of the chunks with mass
    assert recorded["flat", 600, "rows"] == [chunks] * QUESTIONS
    assert recorded["flat", 100000, "rows"] == []
    assert recorded["ann", 600, "rows"] and max(recorded["ann", 600, "rows"]) < chunks
    assert all(isinstance(w.dense, Flat) for w in recorded["flat", "walks"])
    assert all(isinstance(w.dense, Nearest) and len(w.dense.positions) == FIRST_SEARCH
               and len(w.held) + FIRST_SEARCH < chunks for w in recorded["ann", "walks"])
    # the dense seeds and their weights, normalised by the least similar chunk of all:
    # the index found it as the chunk nearest the question's opposite
    for flat_walk, ann_walk in zip(recorded["flat", "walks"], recorded["ann", "walks"]):
        (flat_top, flat_weights), (ann_top, ann_weights) = (
            walk.dense.seeds(10) for walk in (flat_walk, ann_walk))
        assert list(ann_top) == list(flat_top)
        assert ann_weights == pytest.approx(flat_weights, abs=1e-6)
        assert list(ann_walk.held) == list(flat_walk.held)
    for flat_context, ann_context in zip(recorded["flat", 600], recorded["ann", 600]):
        assert ann_context[:5] == flat_context[:5]
    # past the chunks searched first, the large budget's fill searched further (twice as
    # many: every chunk), once a question
    assert recorded["ann", 100000, "rows"] == [chunks] * QUESTIONS
    for flat_context, ann_context in zip(recorded["flat", 100000], recorded["ann", 100000]):
        assert len(ann_context) == len(flat_context) == chunks
        assert ann_context[:5] == flat_context[:5]


def test_ppr_rankings_over_an_index_have_their_own_fingerprint(written: tuple[Path, Path]
                                                                ) -> None:
    """A walk over an index may rank a little differently (the index's approximation, the
    fill past what was searched), so its retrieve steps are not the flat ones' nor those
    an older walk over the same index cached; the dense strategy's config is unchanged."""
    flat, ann = ({step.name: step for step in open_with(spec, RuleLLM()).plan.steps}
                 for spec in written)
    for budget in BUDGETS:
        name = f"retrieve.ppr@budget_tokens={budget}"
        assert ann[name].config["dense_scores"] == "nearest"
        assert "dense_scores" not in flat[name].config
    assert "dense_scores" not in ann["retrieve.dense"].config


def test_what_fusion_reads_of_ppr_is_its_ranking_flat_and_over_an_index(
        specs: tuple[Path, Path]) -> None:
    """Fusion reads a ppr member lazily (``PprStrategy.reading``): sorted only as far as
    it is read on the flat scores, given whole over an index, where the ranking ends
    after the chunks searched. Read to any depth, it is ``ranking``'s head."""
    for spec in specs:
        strategies, questions, vectors = ppr_strategies(spec)
        strategy = strategies[600]
        for question, vector in zip(questions, vectors):
            ranking = strategy.ranking(question, vector)
            for depth in (1, 7, 40, len(ranking) + 5):
                assert strategy.reading(question, vector).first(depth) == ranking[:depth]
            whole = strategy.reading(question, vector)
            assert whole.first(len(ranking) + 5) == ranking and whole.ends_within(len(ranking))
        if strategy.search.index is not None:  # over the index: held chunks, then searched
            assert len(ranking) < len(strategy.search.graph.chunk_ids)
