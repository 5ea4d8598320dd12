"""The walks a ppr search remembers, bounded in bytes, on a real graph: spaCy's entities
of a real 2Wiki slice, a sweep of two budgets over the power and the push walk."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from kgrag.retrieval.ppr import PprStrategy
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.walked import WALK_MEMO_BYTES, WalkMemo
from kgrag.steps.retrieve import load_strategy
from tests.conftest import SHARED_DATA, write_spec
from tests.standin import RuleLLM, open_with, run_with

BUDGETS = [250, 600]
QUERY = [{"name": "power", "strategy": "ppr", "entities": "ents", "budget_tokens": BUDGETS},
         {"name": "push", "strategy": "ppr", "entities": "ents", "walk": "push",
          "budget_tokens": BUDGETS}]


@pytest.fixture
def spec(project: Path) -> Path:
    """The first 2Wiki question that has paragraphs, with an nlp entities graph."""
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        first = next(line for line in handle if '"context"' in line)
    (project / "2wiki.jsonl").write_text(first)
    return write_spec(project, "memo", corpus={"dataset": "2wiki", "path": "../2wiki.jsonl"},
                      extraction={"method": "nlp"}, graphs=[{"name": "ents", "kind": "entities"}],
                      query=QUERY, answer={"questions": 0}, evaluate={"metrics": ["coverage"]})


def counted(search: PprSearch, memo: WalkMemo) -> tuple[PprSearch, list[str]]:
    """``search`` with its own memo ``memo`` and the list of questions it walks."""
    walks: list[str] = []
    copied = copy.copy(search)
    copied.walked = memo
    copied.run = lambda question, vector: walks.append(question) or search.run(question, vector)
    return copied, walks


def sweep(search: PprSearch, strategies: list[PprStrategy], questions: list[str],
          vectors: np.ndarray) -> tuple[list, list[int]]:
    """What a sweep reads, in a run's order (each budget over every question): each
    context (chunks, trace), the ranking fusion reads with its masses and trace, and the
    memo's bytes after every question."""
    read, held = [], []
    for strategy in strategies:
        for question, vector in zip(questions, vectors):
            context = strategy.retrieve(question, vector)
            ranked, scores, trace = search.scored(question, vector)
            read.append((context.unit_ids, context.trace, ranked, list(scores.items()), trace))
            held.append(search.walked.nbytes)
    return read, held


def test_a_bounded_walk_memo_evicts_and_every_context_stays_the_same(spec: Path) -> None:
    """Was: every question's walk kept for the whole run (at a million chunks 4 MB of
    similarities and, through a slice, every node's mass). Now the memo holds at most its
    bound; a sweep whose walks do not fit walks each question again for each budget, and
    every context, trace, ranking and mass is the one the unbounded memo gives."""
    run_with(spec, RuleLLM())
    session = open_with(spec, RuleLLM())
    loaded: dict[str, list[PprStrategy]] = {}
    embedder = None
    for step in session.plan.steps:
        if step.kind == "retrieve":
            inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
            strategy = load_strategy(step.config, inputs, session.models)
            loaded.setdefault(step.config["strategy"]["name"].split("@")[0], []).append(strategy)
            embedder = session.models.embedder_of(step.config["embedder"])
    assert embedder is not None and set(loaded) == {"power", "push"}
    for strategies in loaded.values():  # a sweep's budgets share one search
        assert sorted(s.budget for s in strategies) == BUDGETS
        assert strategies[0].search is strategies[1].search
        assert strategies[0].search.walked.limit == WALK_MEMO_BYTES
    names = loaded["power"][0].search.graph.names
    questions = [f"Where was {names[i]} from, and who knew {names[i + 1]}?"
                 for i in range(0, min(len(names) - 1, 30), 2)] + ["Is water wet?"]
    vectors = embedder.encode(questions)
    for strategies in loaded.values():
        search = strategies[0].search
        whole, whole_walks = counted(search, WalkMemo(2**62))
        expected, _ = sweep(whole, [PprStrategy(whole, s.units, s.budget) for s in strategies],
                            questions, vectors)
        assert whole_walks == questions  # each question walked once, for both budgets
        kept = list(whole.walked.walks.values())
        assert len(kept) == len(questions) and whole.walked.evictions == 0
        for (question, vector_bytes), (walked, size) in whole.walked.walks.items():
            # a walk keeps its chunks' similarity and the mass of those with mass, not a
            # view of every node's mass; its size counts those arrays and its key
            assert walked.dense.similarity.shape == (len(search.graph.chunk_ids),)
            assert walked.mass is None or (walked.mass.base is None
                                           and walked.mass.shape == walked.held.shape)
            assert size == walked.nbytes + len(question.encode()) + len(vector_bytes)
        limit = 3 * max(size for _, size in kept)
        bounded, bounded_walks = counted(search, WalkMemo(limit))
        got, held = sweep(bounded, [PprStrategy(bounded, s.units, s.budget)
                                    for s in strategies], questions, vectors)
        assert got == expected
        assert max(held) <= limit and 0 < len(bounded.walked) <= 3
        assert bounded.walked.nbytes == sum(size for _, size in bounded.walked.walks.values())
        # run order (each budget over every question) misses every question under LRU: each
        # budget walks each question again, once (its ranking after its context is kept)
        assert bounded_walks == questions * len(BUDGETS)
        assert bounded.walked.evictions == len(questions) * len(BUDGETS) - len(bounded.walked)

        # a walk larger than the bound is returned and not kept
        tiny, walks = counted(search, WalkMemo(1))
        assert tiny.scored(questions[0], vectors[0])[0] == expected[0][2]
        tiny.scored(questions[0], vectors[0])
        assert walks == questions[:1] * 2
        assert len(tiny.walked) == 0 and tiny.walked.nbytes == tiny.walked.evictions == 0
