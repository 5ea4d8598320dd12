"""HugRAG's grounded evidence split and the causal filter's top-up, on the hand-made graph
of ``test_retrieval_hugrag`` (three 40-token chunks, six 5-token entity / module rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.registry import resolve_embedder
from kgrag.retrieval.hugrag.budget import check_summary_share, shares
from kgrag.retrieval.hugrag.causal_filter import linearise, read_reply
from kgrag.retrieval.hugrag.search import best_chunks, expand, hybrid_scores
from kgrag.spec.load import check_spec
from tests.retrieval.test_retrieval_hugrag import (
    CONFIG,
    QUESTION,
    VECTOR,
    WEIGHTS,
    graph,
    keys,
    strategy,
)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2", Path.cwd()).path)


GROUNDED = {"evidence_split": "grounded", "summary_share": 0.1, "entity_share": 0.1,
            "seed_chunks": 0}


def test_caps_keep_rows_to_their_share_and_still_expand_through_them() -> None:
    g = graph()
    scores = hybrid_scores(g, QUESTION, VECTOR, 0.7)
    seeds = [g.index[("module", "M1")]]
    # no room for modules at all: M1, M3 are not chosen, yet the gate path to GAMMA and
    # its chunk is walked through them
    caps = {"module": 0, "entity": 10, "chunk": 80}
    walk = expand(g, seeds, scores, 90, weights=WEIGHTS, decay=0.7, max_hops=5,
                  fan_out=5, allowed=frozenset(WEIGHTS), caps=caps)
    chosen, used = walk.chosen, walk.used
    reached = keys(g, chosen)
    assert not any(k.startswith("M") for k in reached)
    assert sum(g.nodes[i].kind == "entity" for i in chosen) == 2  # 10 tokens: two rows
    assert sum(g.nodes[i].kind == "chunk" for i in chosen) == 2  # 80 tokens: two chunks
    assert used == 90
    # without caps the same budget goes to the rows first (the paper's expansion)
    plain = expand(g, seeds, scores, 90, weights=WEIGHTS, decay=0.7, max_hops=5,
                   fan_out=5, allowed=frozenset(WEIGHTS)).chosen
    assert sum(g.nodes[i].kind == "chunk" for i in plain) == 1


def test_best_chunks_fill_the_room_by_score_skipping_chosen_ones() -> None:
    g = graph()
    scores = hybrid_scores(g, QUESTION, VECTOR, 0.7)
    c1 = g.index[("chunk", "c1")]
    picked, used = best_chunks(g, scores, {c1: 0}, 85)
    assert [g.nodes[i].key for i in picked] == ["c3", "c2"] and used == 80
    assert best_chunks(g, scores, {}, 39) == ([], 0)


def test_shares_split_the_budget_and_drop_summaries_without_the_hierarchy() -> None:
    config = {**CONFIG, **GROUNDED, "budget_tokens": 1000}
    assert shares(config) == {"module": 100, "entity": 100, "chunk": 800}
    assert shares({**config, "use_hierarchy": False}) == {"module": 0, "entity": 100,
                                                          "chunk": 900}


def test_a_summary_share_too_small_for_one_summary_is_an_error() -> None:
    config = {**CONFIG, **GROUNDED, "budget_tokens": 40}  # 4 tokens; summaries have 5
    with pytest.raises(KgragError, match="too small for one module summary"):
        check_summary_share(config, graph())
    check_summary_share({**config, "summary_share": 0.0}, graph())  # no summaries: fine
    check_summary_share({**config, "budget_tokens": 50}, graph())


def test_grounded_retrieval_spends_most_of_the_budget_on_chunks(tmp_path: Path,
                                                                 tokenizer: Tokenizer) -> None:
    hug = strategy(tmp_path, tokenizer, causal_filter=False, budget_tokens=100, **GROUNDED)
    context = hug.retrieve(QUESTION, VECTOR)
    assert len(context.unit_ids) == 2  # 80 of the 100 tokens
    paper = strategy(tmp_path, tokenizer, causal_filter=False, budget_tokens=100)
    assert len(paper.retrieve(QUESTION, VECTOR).unit_ids) < 2
    # a question whose expansion reaches no chunk: the chunks' share is topped up
    lone = strategy(tmp_path, tokenizer, causal_filter=False, budget_tokens=100,
                    max_hops=0, **GROUNDED)
    context = lone.retrieve(QUESTION, VECTOR)
    assert context.trace["chunks_beyond_expansion"] == 2 and len(context.unit_ids) == 2


def test_chunk_seeds_start_the_walk_from_the_best_text(tmp_path: Path,
                                                      tokenizer: Tokenizer) -> None:
    # one entity seed, no module seed: the expansion alone reaches c1 first
    config = {**GROUNDED, "seed_modules": 0, "causal_filter": False, "budget_tokens": 50}
    alone = strategy(tmp_path, tokenizer, **config)
    g = alone.graph
    g.vectors[g.index[("chunk", "c3")]] = [1.0, 0.0, 0.0]  # the chunk most like the question
    assert alone.retrieve(QUESTION, VECTOR).unit_ids == ["c1"]
    seeded = strategy(tmp_path, tokenizer, **{**config, "seed_chunks": 1})
    seeded.graph.vectors[seeded.graph.index[("chunk", "c3")]] = [1.0, 0.0, 0.0]
    context = seeded.retrieve(QUESTION, VECTOR)
    assert context.unit_ids == ["c3"] and "c3" in context.trace["seeds"]


def test_read_reply_drops_unknown_ids_and_falls_back_when_none_is_shown() -> None:
    g = graph()
    items = linearise(g, {g.index[("entity", "ALPHA")]: 0, g.index[("chunk", "c1")]: 1}, [])
    kept, spurious, outcome = read_reply(
        {"precise": ["T1", "X9"], "ct_precise": ["N1", "Q2"]}, items)
    assert [i.item_id for i in kept] == ["T1"] and spurious == {"N1"} and outcome == "ok"
    kept, _, outcome = read_reply({"precise": ["X9"], "ct_precise": []}, items)
    assert kept == items and outcome.startswith("fallback: only ids not shown")


def test_a_filter_fallback_is_counted_in_the_trace(tmp_path: Path,
                                                    tokenizer: Tokenizer) -> None:
    empty = json.dumps({"precise": [], "ct_precise": [], "p_answer": ""})
    context = strategy(tmp_path, tokenizer, empty).retrieve(QUESTION, VECTOR)
    assert "empty precise" in context.trace["fallback"]


def test_top_up_refills_the_budget_without_what_the_filter_called_spurious(
        tmp_path: Path, tokenizer: Tokenizer) -> None:
    reply = json.dumps({"precise": ["N1"], "ct_precise": ["T1"], "p_answer": "alpha"})
    bare = strategy(tmp_path / "a", tokenizer, reply, budget_tokens=100, **GROUNDED)
    starved = bare.retrieve(QUESTION, VECTOR)
    assert starved.unit_ids == [] and starved.trace["kept"] == 1
    assert "top_up" not in starved.trace
    shown = strategy(tmp_path / "c", tokenizer, causal_filter=False, budget_tokens=100,
                     **GROUNDED).retrieve(QUESTION, VECTOR).unit_ids
    topped = strategy(tmp_path / "b", tokenizer, reply, budget_tokens=100,
                      filter_top_up=True, **GROUNDED).retrieve(QUESTION, VECTOR)
    # T1, the first chunk shown, was called spurious: it stays out; the other shown chunk
    # comes back, and the chunk never shown fills the room T1 left
    assert shown[0] not in topped.unit_ids and shown[1] in topped.unit_ids
    assert len(topped.unit_ids) == 2 and set(topped.unit_ids) - set(shown)
    added = topped.trace["top_up"]
    assert added["tokens"] <= 100 - 5 and added["items"] >= 2


def _check(tmp_path: Path, graph: dict, **entry) -> list[str]:
    spec = {"name": "s", "corpus": {"dataset": "holisqa", "path": str(tmp_path)},
            "graphs": [{"name": "g", "kind": "hierarchy", **graph}],
            "query": [{"name": "h", "strategy": "hugrag", "hierarchy": "g", **entry}]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return check_spec(path)


def test_spec_checks_the_shares_the_top_up_switch_and_the_salience_keys(
        tmp_path: Path) -> None:
    problems = _check(tmp_path, {}, evidence_split="grounded", summary_share=0.6,
                      entity_share=0.6)
    assert any("add up to more than the whole budget" in p for p in problems)
    problems = _check(tmp_path, {}, causal_filter=False, filter_top_up=True)
    assert any("set causal_filter true" in p for p in problems)
    problems = _check(tmp_path, {"relationships_per_entity": 2})
    assert any("set salient_min_chunks too" in p for p in problems)
    assert _check(tmp_path, {"salient_min_chunks": 4, "relationships_per_entity": 2},
                  evidence_split="grounded", filter_top_up=True) == []


CHUNKS_FIRST = {"evidence_split": "grounded", "summary_share": 0.0, "entity_share": 0.0,
                "seed_chunks": 0, "causal_filter": False}


def test_score_rank_takes_whole_chunks_first_and_rows_fill_what_is_left(
        tmp_path: Path, tokenizer: Tokenizer) -> None:
    config = {**CHUNKS_FIRST, "budget_tokens": 100}
    walked = strategy(tmp_path, tokenizer, **config)
    ranked = strategy(tmp_path, tokenizer, chunk_rank="score", **config)
    for hug in (walked, ranked):  # c3, three hops from the seeds, is most like the question
        hug.graph.vectors[hug.graph.index[("chunk", "c3")]] = [1.0, 0.0, 0.0]
    assert walked.retrieve(QUESTION, VECTOR).unit_ids == ["c1", "c3"]  # best gain first
    context = ranked.retrieve(QUESTION, VECTOR)
    assert context.unit_ids == ["c3", "c1"]  # by hybrid score, two 40-token chunks
    # the 20 tokens no third chunk fits go to four 5-token rows, in the walk's order
    assert context.trace["rows_in_remainder"] == 20 and context.trace["items"] == 6
    assert context.trace["reached"]  # the rows' entities count as reached (App. E)
    assert "ALPHA" in context.text and "M1" not in context.trace["reached"]


def test_score_and_walk_lifts_the_chunks_the_walk_reaches(tmp_path: Path,
                                                          tokenizer: Tokenizer) -> None:
    # one hop: the walk reaches c1 (from ALPHA) and never c3, which scores higher
    config = {**CHUNKS_FIRST, "budget_tokens": 60, "max_hops": 1}
    picks = {}
    for rank in ("score", "score_and_walk"):
        hug = strategy(tmp_path, tokenizer, chunk_rank=rank, **config)
        hug.graph.vectors[hug.graph.index[("chunk", "c3")]] = [1.0, 0.0, 0.0]
        context = hug.retrieve(QUESTION, VECTOR)
        picks[rank] = context.unit_ids
        assert context.trace["chunks_walk_reached"] == (picks[rank] == ["c1"])
    assert picks == {"score": ["c3"], "score_and_walk": ["c1"]}
