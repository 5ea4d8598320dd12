"""Strategies ``bm25`` and ``fusion`` (reciprocal-rank fusion) on hand-made units."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kgrag.errors import KgragError
from kgrag.models import bundled_embedder
from kgrag.retrieval import STRATEGIES, Resources, inputs, load
from kgrag.retrieval.bm25 import Bm25Index, Bm25Strategy
from kgrag.retrieval.budget import LazyRanking, fill_as_read, fill_budget
from kgrag.retrieval.fusion import FusionStrategy, fused, reciprocal_rank_fusion
from kgrag.retrieval.naive import NaiveStrategy
from kgrag.retrieval.units import Units
from kgrag.store.vectors import VectorTable
from tests.conftest import SHARED_DATA

TEXTS = {"c1": "# Paris\nParis is the capital of France.",
         "c2": "# Lyon\nLyon is a city in France on the Rhone.",
         "c3": "# Tolkien\nJ. R. R. Tolkien wrote The Hobbit.",
         "c4": "# Rhone\nThe Rhone flows through Lyon and Arles."}


def units() -> Units:
    return Units(TEXTS, dict.fromkeys(TEXTS, 10), {c: f"d{c[1:]}" for c in TEXTS})


def test_bm25_ranks_rare_shared_words_first_and_leaves_out_units_without_any():
    index = Bm25Index(units())
    assert index.ranked("Which city lies on the Rhone?") == ["c2", "c4"]  # city and Rhone
    assert index.ranked("Who wrote The Hobbit?") == ["c3"]
    assert index.ranked("zebra quagga") == []
    assert index.ranked("the of is") == []  # stop words only


def test_bm25_fills_the_budget_in_rank_order():
    strategy = Bm25Strategy(Bm25Index(units()), units(), budget=20)
    context = strategy.retrieve("capital of France", np.zeros(2))
    assert context.unit_ids == ["c1", "c2"] and context.tokens == 20
    assert STRATEGIES["bm25"].inputs({}) == {}


def test_rrf_sums_reciprocal_ranks():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "b", "d"]], k=1)
    # a: 1/2; b: 1/3 + 1/3; c: 1/4 + 1/2; d: 1/4
    assert fused == ["c", "b", "a", "d"]


def test_rrf_ties_keep_first_appearance_and_k_flattens_the_ranks():
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=60) == ["a", "b"]
    # with a large k, being in both lists beats being first in one
    lists = [["a", "x", "y", "b"], ["c", "z", "w", "b"]]
    assert reciprocal_rank_fusion(lists, k=1000)[0] == "b"  # 2/1004 > 1/1001
    assert reciprocal_rank_fusion(lists, k=1)[0] == "a"  # 1/2 > 2/5


class Fixed:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return self.order


def test_fusion_fills_the_budget_with_the_fused_ranking():
    strategy = FusionStrategy([Fixed(["c1", "c2", "c3"]), Fixed(["c3", "c4"])], units(),
                              budget=20, rrf_k=60)
    assert strategy.retrieve("q", np.zeros(2)).unit_ids == ["c3", "c1"]


def test_fusion_loads_its_members_from_their_own_artefacts(tmp_path: Path):
    config = {"name": "rrf", "strategy": "fusion", "budget_tokens": 20, "rrf_k": 60,
              "fuse": [{"name": "a", "strategy": "bm25", "budget_tokens": 20},
                       {"name": "b", "strategy": "naive", "budget_tokens": 20, "top_k": None}]}
    assert inputs(config) == {"1.dense": "dense"}
    strategy = load({**config, "fuse": config["fuse"][:1] * 2}, {},
                    Resources(units(), tokenizer=None))
    assert strategy.retrieve("capital of France", np.zeros(2)).unit_ids == ["c1", "c2"]


@pytest.mark.parametrize("fuse, message", [
    (["a", "b"], "fuse needs the configs of the entries it names"),
    ([{"name": "a", "strategy": "ket"}, {"name": "b", "strategy": "bm25"}], "does not rank"),
])
def test_fusion_of_names_or_of_a_strategy_without_a_ranking_is_refused(fuse, message):
    with pytest.raises(KgragError, match=message):
        inputs({"name": "rrf", "strategy": "fusion", "fuse": fuse})


def sample_units(rows: int) -> Units:
    """The first ``rows`` questions' paragraphs of the shared musique sample."""
    import json

    texts = {}
    for line in (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:rows]:
        for paragraph in json.loads(line)["paragraphs"]:
            texts[f"c{len(texts)}"] = f"# {paragraph['title']}\n{paragraph['paragraph_text']}"
    return Units(texts, dict.fromkeys(texts, 100), dict.fromkeys(texts, "d"))


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_bm25_sorts_only_the_units_a_question_scores_and_ranks_as_a_full_sort(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: every unit's score sorted per question (at a million chunks, more than the
    scoring). The ranking is the one of a stable sort of every score, cut at the last
    unit with a positive score, on real paragraphs."""
    index = Bm25Index(sample_units(30))
    questions = ["Who founded the company that makes the iPhone?",
                 "When was the capital of the Andaman and Nicobar Islands founded?",
                 "What river flows through the city where the film was made?"]
    full = {}
    for question in questions:
        scores = index.scores(question)
        order = np.argsort(-scores, kind="stable")
        full[question] = [index.ids[i] for i in order[: int((scores > 0).sum())]]
    sorted_sizes = []
    argsort = np.argsort
    monkeypatch.setattr(np, "argsort", lambda a, **kw: sorted_sizes.append(len(a))
                        or argsort(a, **kw))
    for question in questions:
        assert index.ranked(question) == full[question] and full[question]
        assert sorted_sizes[-1] == len(full[question]) < len(index.ids)


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_bm25_scores_are_bm25s_own_to_the_bit():
    """The postings are summed here (a question's words' columns only): the scores are
    bm25s's, bit for bit, for questions with repeated, unknown and stop words."""
    index = Bm25Index(sample_units(30))
    for question in ["Who founded the company that makes the iPhone?",
                     "Port Blair port blair Andaman, zebra quagga", "the of is", ""]:
        words = index.words.tokenize([question], update_vocab=False, return_as="ids",
                                     show_progress=False)[0]
        theirs = index.index.get_scores(words) if words else np.zeros(len(index.ids))
        ours = index.scores(question)
        assert ours.dtype == np.float32 and ours.tobytes() == theirs.astype(np.float32).tobytes()


def tied_sample(questions: int = 100) -> tuple[Units, list[str]]:
    """The shared musique sample's first ``questions`` questions and their paragraphs, each
    paragraph twice under two ids (the copies score alike: ties broken by unit order),
    a unit's size its words (real sizes: a budget leaves gaps only small units fill)."""
    import json

    rows = [json.loads(line) for line in
            (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:questions]]
    texts = {f"c{i}#{copy}": f"# {p['title']}\n{p['paragraph_text']}" for copy in range(2)
             for i, p in enumerate(p for row in rows for p in row["paragraphs"])}
    return (Units(texts, {u: len(t.split()) for u, t in texts.items()}, dict.fromkeys(texts, "d")),
            [row["question"] for row in rows])


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_bm25_and_fusion_contexts_are_those_of_the_fully_sorted_ranking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: bm25's context filled from the ranking of every scored unit. Now the ranking
    is sorted only as far as the fill reads it: the contexts of bm25 and of its fusion
    with another ranking stay those of a stable sort of every score (tied copies in unit
    order), at budgets that take none, a few and hundreds of units, while a question
    sorts a small part of what it scores."""
    units, questions = tied_sample()
    index = Bm25Index(units)
    other = Fixed([f"c{i}#1" for i in range(0, 400, 7)])
    sorted_sizes: list[int] = []
    argsort = np.argsort
    monkeypatch.setattr(np, "argsort", lambda a, **kw: sorted_sizes.append(len(a))
                        or argsort(a, **kw))
    for question in questions:
        scores = index.scores(question)
        scored = int((scores > 0).sum())
        full = [index.ids[i] for i in argsort(-scores, kind="stable")[:scored]]
        for budget in (20, 60, 1000, 20000):
            sorted_sizes.clear()
            context = Bm25Strategy(index, units, budget).retrieve(question, np.zeros(2))
            assert context == units.filled(full, budget)
            if budget == 1000 and scored > 1000:
                assert sum(sorted_sizes) < scored / 10
            fused = FusionStrategy([Bm25Strategy(index, units, budget), other], units, budget,
                                   rrf_k=60).retrieve(question, np.zeros(2))
            assert fused == units.filled(reciprocal_rank_fusion([full, other.order]), budget)


def eager_rrf(rankings: list[list[str]], k: int) -> list[str]:
    """Fusion as it was: every member's whole ranking fused into one dict and sorted."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, unit in enumerate(ranking, start=1):
            scores[unit] = scores.get(unit, 0.0) + 1.0 / (k + rank)
    first_seen = {unit: i for i, unit in enumerate(scores)}
    return sorted(scores, key=lambda unit: (-scores[unit], first_seen[unit]))


def test_units_tied_with_the_unread_bound_keep_the_order_of_first_naming():
    """At depth 32 and k = 1 an unread unit scores at most 1/34 + 1/34 = 1/17: x (16th in
    the first ranking only) and y (16th in the second only) tie with z, 33rd in both and
    not yet read. Ties go by first naming: x, then z, then y, so y must wait for z."""
    first = [f"a{i}" for i in range(40)]
    second = [f"b{i}" for i in range(40)]
    first[15], second[15], first[32], second[32] = "x", "y", "z", "z"
    readings = [LazyRanking(first), LazyRanking(second)]
    fused_ranking = list(fused(readings, 1, lambda: math.inf))
    assert fused_ranking == eager_rrf([first, second], 1)
    assert fused_ranking.index("x") < fused_ranking.index("z") < fused_ranking.index("y")
    assert 1.0 / 17 == 1.0 / 34 + 1.0 / 34  # the tie is exact in floats


def random_member(rng: np.random.Generator, ids: np.ndarray, sizes: np.ndarray
                  ) -> tuple[list[str], Callable[[], LazyRanking]]:
    """A ranking of some of ``ids`` and a maker of its fresh readings: a whole ranking,
    or scores of five values (ties everywhere) sorted as read, with a head before them
    as ppr's chunks with mass."""
    n = len(ids)
    if rng.integers(3) == 0:
        whole = ids[rng.permutation(n)[: rng.integers(0, n + 1)]].tolist()
        return whole, lambda: LazyRanking(whole)
    scores = rng.integers(0, 5, n).astype(np.float32)
    scored = np.flatnonzero(scores > 0)
    order = scored[np.argsort(-scores[scored], kind="stable")]
    head = ids[rng.permutation(order)[: rng.integers(0, 6)]].tolist()
    rest = np.setdiff1d(scored, [int(u[1:]) for u in head])
    whole = head + [u for u in ids[order].tolist() if u not in set(head)]
    position = {u: i for i, u in enumerate(ids.tolist())}
    return whole, lambda: LazyRanking(head, scores, rest, ids, sizes, position)


def test_lazy_fusion_is_the_eager_fusion_of_rankings_full_of_ties():
    """Members of every kind, rankings shorter and longer than the first depth, k from 1:
    the ranking and each budget's context are the eager fusion's."""
    rng = np.random.default_rng(0)
    for _ in range(150):
        n = int(rng.integers(1, 300))
        ids = np.array([f"u{i}" for i in range(n)], dtype=object)
        sizes = rng.integers(1, 50, n)
        tokens = dict(zip(ids.tolist(), sizes.tolist()))
        (first, read_first), (second, read_second) = (random_member(rng, ids, sizes),
                                                      random_member(rng, ids, sizes))
        k = int(rng.choice([1, 2, 60]))
        eager = eager_rrf([first, second], k)
        assert list(fused([read_first(), read_second()], k, lambda: math.inf)) == eager
        for budget in (0, 30, 200, 5000):
            readings = [read_first(), read_second()]
            filled = fill_as_read(functools.partial(fused, readings, k), tokens, budget)
            assert filled == fill_budget(eager, tokens, budget)


class Once:
    """A member whose ranking is computed once per question (LanceDB may order tied
    vectors differently from one search to the next: the comparison needs one order)."""

    def __init__(self, member: NaiveStrategy) -> None:
        self.member, self.seen = member, {}

    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        if question not in self.seen:
            self.seen[question] = self.member.ranking(question, vector)
        return self.seen[question]


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="reads ../shared/data")
def test_lazy_fusion_of_minilm_and_bm25_is_the_eager_fusion(
        tmp_path: Path, cache, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: each member's whole ranking fused. Now BM25 is read only as deep as the fill
    needs: on real paragraphs (each twice: ties everywhere), real MiniLM vectors and real
    BM25, fusion's contexts and ranking are the eager fusion's for every question, both
    member orders, k of 1, 60 and 1,000, budgets from none to hundreds of units and dense
    depths that end before and after the first depth (the depth grows), while a question's
    BM25 ranking is sorted only in part."""
    units, questions = tied_sample(15)
    _, embedder = bundled_embedder(cache)
    texts = list(dict.fromkeys(units.text.values()))  # a copy's vector is its twin's
    # each paragraph's opening 40 words embedded: real vectors at a third of the time
    vector_of = dict(zip(texts, embedder.encode([" ".join(t.split()[:40]) for t in texts])))
    ids = list(units.text)
    table = VectorTable.create(tmp_path, "dense", ids,
                               np.array([vector_of[units.text[i]] for i in ids]))
    vectors = embedder.encode(questions)
    index = Bm25Index(units)
    read_to: list[int] = []
    first = LazyRanking.first
    monkeypatch.setattr(LazyRanking, "first", lambda self, n: read_to.append(n)
                        or first(self, n))
    sorted_sizes: list[int] = []
    argsort = np.argsort
    monkeypatch.setattr(np, "argsort", lambda a, **kw: sorted_sizes.append(len(a))
                        or argsort(a, **kw))
    partial = 0
    for top_k in (None, 200):
        for budget in (20, 150, 1000, 20000):
            dense = Once(NaiveStrategy(table, units, top_k, budget))
            bm25 = Bm25Strategy(index, units, budget)
            for question, vector in zip(questions, vectors):
                scores = index.scores(question)
                lexical = [index.ids[i] for i in
                           argsort(-scores, kind="stable")[: int((scores > 0).sum())]]
                for members in ([dense, bm25], [bm25, dense]):
                    rankings = [m.ranking(question, vector) if m is dense else lexical
                                for m in members]
                    for k in (1, 60, 1000):
                        eager = eager_rrf(rankings, k)
                        fusion = FusionStrategy(members, units, budget, k)
                        sorted_sizes.clear()
                        assert fusion.retrieve(question, vector) == units.filled(eager, budget)
                        partial += budget == 1000 and sum(sorted_sizes) < len(lexical) / 2
                        assert fusion.ranking(question, vector) == eager
    assert max(read_to) > 200  # dense's 200 candidates: read past the first depths
    assert partial > len(questions)  # at 1,000 tokens BM25 is mostly left unsorted
