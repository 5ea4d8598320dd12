"""HugRAG retrieval on a hand-made graph: seeds, gated expansion, causal filter.

The world (question vector = first axis, 3-d vectors):

    M1 (level 0) ── membership ── M2 (level 1) ── membership ── ALPHA
    M1 ══ gate ══ M3 ── membership ── GAMMA
    ALPHA ── relationship ── BETA
    ALPHA ── structural ── c1,   BETA ── structural ── c2,   GAMMA ── structural ── c3
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.models.backend import LLMSettings
from kgrag.models.llm import CachedLLM
from kgrag.models.registry import resolve_embedder
from kgrag.retrieval import STRATEGIES, Resources
from kgrag.retrieval.entity_graph import EntityGraph
from kgrag.retrieval.hugrag.causal_filter import filter_schema, linearise
from kgrag.retrieval.hugrag.graph import HugragGraph, Node, keyword_lexicon
from kgrag.retrieval.hugrag.search import expand, hybrid_scores, mmr, relationships_among
from kgrag.retrieval.hugrag.strategy import HugragStrategy
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.units import Units
from tests.conftest import ScriptedBackend

QUESTION = "Why does alpha drive gamma?"
VECTOR = np.array([1.0, 0.0, 0.0], dtype=np.float32)

NODES = [  # kind, key, text, tokens, vector
    ("entity", "ALPHA", "ALPHA: alpha drives things", 5, [0.9, 0.1, 0.0]),
    ("entity", "BETA", "BETA: beta follows alpha", 5, [0.5, 0.5, 0.0]),
    ("entity", "GAMMA", "GAMMA: gamma is driven", 5, [0.2, 0.0, 1.0]),
    ("module", "M1", "Drivers: alpha and relatives", 5, [0.8, 0.2, 0.0]),
    ("module", "M2", "Alpha group: alpha alone", 5, [0.85, 0.0, 0.1]),
    ("module", "M3", "Gamma group: gamma effects", 5, [0.3, 0.0, 0.9]),
    ("chunk", "c1", "# A\nalpha text", 40, [0.7, 0.0, 0.3]),
    ("chunk", "c2", "# B\nbeta text", 40, [0.1, 1.0, 0.0]),
    ("chunk", "c3", "# C\ngamma text", 40, [0.2, 0.2, 0.9]),
]
EDGES = [("M1", "M2", "membership"), ("M2", "ALPHA", "membership"), ("M1", "M3", "gate"),
         ("M3", "GAMMA", "membership"), ("ALPHA", "BETA", "relationship"),
         ("ALPHA", "c1", "structural"), ("BETA", "c2", "structural"),
         ("GAMMA", "c3", "structural")]
WEIGHTS = {"gate": 1.2, "structural": 1.0, "membership": 1.0, "relationship": 0.8}
CONFIG = {"name": "hug", "strategy": "hugrag", "hierarchy": "g", "budget_tokens": 1000,
          "seed_entities": 1, "seed_modules": 1, "mmr_lambda": 0.7, "semantic_weight": 0.7,
          "hop_decay": 0.7, "max_hops": 5, "fan_out": 5, "weights": WEIGHTS,
          "use_gates": True, "use_hierarchy": True, "causal_filter": True,
          "filter_prompt": "spurious_aware"}


def graph() -> HugragGraph:
    nodes = [Node(k, key, text, tokens) for k, key, text, tokens, _ in NODES]
    vectors = np.array([v for *_, v in NODES], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = {key: i for i, (_, key, *_) in enumerate(NODES)}
    edges: list[list[tuple[int, str]]] = [[] for _ in nodes]
    for a, b, kind in EDGES:
        edges[index[a]].append((index[b], kind))
        edges[index[b]].append((index[a], kind))
    lexicon, vocabulary = keyword_lexicon([n.text for n in nodes])
    relationships = pl.DataFrame({"relationship_id": ["R1"], "source": ["ALPHA"],
                                  "target": ["BETA"], "strength": [5.0],
                                  "text": ["ALPHA -- BETA: beta follows alpha"], "tokens": [6]})
    return HugragGraph(nodes, vectors, lexicon, vocabulary, edges, relationships,
                       {"c1": "d1", "c2": "d2", "c3": "d3"})


def keys(g: HugragGraph, chosen: dict[int, int]) -> dict[str, int]:
    return {g.nodes[i].key: hop for i, hop in chosen.items()}


def test_hybrid_score_adds_keyword_overlap() -> None:
    g = graph()
    semantic_only = hybrid_scores(g, QUESTION, VECTOR, 1.0)
    hybrid = hybrid_scores(g, QUESTION, VECTOR, 0.7)
    gamma = g.index[("entity", "GAMMA")]
    # "gamma" is one of the question's 3 keywords (alpha, drive, gamma; "why/does" stop)
    assert hybrid[gamma] > 0.7 * semantic_only[gamma]
    chunk_b = g.index[("chunk", "c2")]
    assert hybrid[chunk_b] == pytest.approx(0.7 * semantic_only[chunk_b])


def test_mmr_prefers_a_novel_second_seed() -> None:
    g = graph()
    scores = hybrid_scores(g, QUESTION, VECTOR, 1.0)
    first, second = mmr(g, scores, "module", 2, 0.3)
    assert g.nodes[first].key == "M2"  # most relevant
    # M1 is more relevant than M3 but nearly a copy of M2: MMR takes M3
    assert g.nodes[second].key == "M3"
    assert mmr(g, scores, "entity", 0, 0.7) == []


def test_expansion_follows_gates_within_hops_and_budget() -> None:
    g = graph()
    scores = hybrid_scores(g, QUESTION, VECTOR, 0.7)
    seeds = [g.index[("module", "M1")]]
    everything = frozenset(WEIGHTS)
    walk = expand(g, seeds, scores, 1000, weights=WEIGHTS, decay=0.7, max_hops=5,
                  fan_out=5, allowed=everything)
    reached = keys(g, walk.chosen)
    assert reached["M1"] == 0 and reached["M3"] == 1 and reached["GAMMA"] == 2
    assert walk.used == sum(n.tokens for n in g.nodes)  # budget large enough for all
    assert walk.passed == {}  # no shares: nothing is walked through
    no_gates = expand(g, seeds, scores, 1000, weights=WEIGHTS, decay=0.7, max_hops=5,
                      fan_out=5, allowed=everything - {"gate"}).chosen
    assert "M3" not in keys(g, no_gates) and "GAMMA" not in keys(g, no_gates)
    short = expand(g, seeds, scores, 1000, weights=WEIGHTS, decay=0.7, max_hops=1,
                   fan_out=5, allowed=everything).chosen
    assert set(keys(g, short)) == {"M1", "M2", "M3"}
    narrow = expand(g, seeds, scores, 1000, weights=WEIGHTS, decay=0.7, max_hops=1,
                    fan_out=1, allowed=everything).chosen
    assert len(narrow) == 2
    # a 50-token budget: the six 5-token nodes come first (higher gain); then no
    # 40-token chunk fits, and a node too big for the rest is skipped, not a stop
    tight = expand(g, seeds, scores, 50, weights=WEIGHTS, decay=0.7, max_hops=5,
                   fan_out=5, allowed=everything)
    assert tight.used == 30 and not any(g.nodes[i].kind == "chunk" for i in tight.chosen)
    roomy = expand(g, seeds, scores, 71, weights=WEIGHTS, decay=0.7, max_hops=5,
                   fan_out=5, allowed=everything)
    assert roomy.used == 70 and sum(g.nodes[i].kind == "chunk" for i in roomy.chosen) == 1


def test_linearisation_gives_short_ids_by_kind() -> None:
    g = graph()
    chosen = {g.index[("entity", "ALPHA")]: 0, g.index[("chunk", "c1")]: 1,
              g.index[("module", "M2")]: 1, g.index[("entity", "BETA")]: 1}
    rels, _ = relationships_among(g, chosen, 100)
    items = linearise(g, chosen, rels)
    assert [i.item_id for i in items] == ["M1", "N1", "N2", "R1", "T1"]
    assert items[0].key == "M2" and items[-1].key == "c1"
    assert relationships_among(g, chosen, 3)[0] == []  # no room for the 6-token row
    schema = filter_schema(["N1", "T1"], spurious_aware=False)
    assert list(schema["properties"]) == ["precise"]
    assert schema["properties"]["precise"]["items"]["enum"] == ["N1", "T1"]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2", Path.cwd()).path)


def strategy(tmp_path: Path, tokenizer: Tokenizer, *replies: str, **config) -> HugragStrategy:
    from kgrag.models.cache import CallCache

    llm = CachedLLM(LLMSettings(name="toy", path=Path("/m/toy.gguf"), sha256="cd" * 32,
                                max_retries=1), CallCache(tmp_path / "c"),
                    ScriptedBackend(*replies))
    units = Units({}, {}, {})
    return HugragStrategy({**CONFIG, **config}, graph(), Resources(units, tokenizer, llm))


def test_causal_filter_keeps_only_precise_items(tmp_path: Path, tokenizer: Tokenizer) -> None:
    hug = strategy(tmp_path, tokenizer, json.dumps(
        {"precise": ["T1"], "ct_precise": ["N1"], "p_answer": "alpha"}))
    context = hug.retrieve(QUESTION, VECTOR)
    assert context.trace["filter"] == "ok" and context.trace["kept"] == 1
    assert context.unit_ids == ["c1"] and context.doc_ids == ["d1"]
    assert context.text == "# A\nalpha text" and context.llm_calls == 1 and context.llm_ms > 0
    assert "reached_without_gates" in context.trace


@pytest.mark.parametrize("replies, outcome", [
    ([json.dumps({"precise": [], "ct_precise": [], "p_answer": ""})], "empty precise"),
    (["not json", "still not json"], "never parsed"),
])
def test_causal_filter_fallback_keeps_all_evidence(tmp_path: Path, tokenizer: Tokenizer,
                                                   replies: list[str], outcome: str) -> None:
    context = strategy(tmp_path, tokenizer, *replies).retrieve(QUESTION, VECTOR)
    assert outcome in context.trace["filter"]
    assert context.trace["items"] == context.text.count("\n\n") + 1
    assert set(context.unit_ids) == {"c1", "c2", "c3"}


def test_ablations_switch_edges_and_the_filter(tmp_path: Path, tokenizer: Tokenizer) -> None:
    flat = strategy(tmp_path, tokenizer, use_hierarchy=False, causal_filter=False)
    context = flat.retrieve(QUESTION, VECTOR)
    assert context.llm_calls == 0 and context.trace["filter"] == "off"
    assert not any(k.startswith("M") for k in context.trace["seeds"])
    assert "reached_without_gates" not in context.trace
    assert STRATEGIES["hugrag"].inputs({**CONFIG, "use_hierarchy": False}) == {
        "hierarchy": "hierarchy.g", "dense": "dense"}
    assert STRATEGIES["hugrag"].inputs(CONFIG) == {"hierarchy": "hierarchy.g", "dense": "dense",
                                            "summaries": "summaries.g", "gates": "gates.g"}


def test_a_question_matching_no_seed_falls_back_to_chunks(tmp_path: Path,
                                                         tokenizer: Tokenizer) -> None:
    hug = strategy(tmp_path, tokenizer, causal_filter=False)
    # the question vector points away from every entity and module, and shares no keyword
    away = np.array([-1.0, 0.0, 0.0], dtype=np.float32)
    hug.graph.vectors[[hug.graph.index[("chunk", "c2")]]] = [0.0, -0.6, 0.8]
    context = hug.retrieve("zzz?", away / np.linalg.norm(away))
    assert "no seed matches" in context.trace["fallback"]
    assert all(k.startswith("c") for k in context.trace["seeds"]) and context.unit_ids


def test_a_budget_too_small_for_any_item_skips_the_filter(tmp_path: Path,
                                                          tokenizer: Tokenizer) -> None:
    context = strategy(tmp_path, tokenizer, budget_tokens=2).retrieve(QUESTION, VECTOR)
    assert context.trace["items"] == 0 and context.llm_calls == 0
    assert context.trace["filter"].startswith("skipped") and context.text == ""


def ppr_seeded(tokenizer: Tokenizer) -> HugragStrategy:
    """entity_seeds: ppr over the world's entities (each linked to its chunk)."""
    entities = pl.DataFrame({"name": ["ALPHA", "BETA", "GAMMA"],
                             "source_chunk_ids": [["c1"], ["c2"], ["c3"]]})
    relationships = pl.DataFrame({"source": ["ALPHA"], "target": ["BETA"], "strength": [5.0]})
    walked = EntityGraph.build([entities], [relationships], ["c1", "c2", "c3"], None)
    chunks = np.array([v for kind, *_, v in NODES if kind == "chunk"], dtype=np.float32)
    search = PprSearch(walked, chunks, damping=0.5, max_iterations=50, dense_seeds=0.0)
    config = {**CONFIG, "entity_seeds": "ppr", "causal_filter": False}
    return HugragStrategy(config, graph(), Resources(Units({}, {}, {}), tokenizer), search)


def test_ppr_entity_seeds_start_from_the_entity_the_question_names(tmp_path: Path,
                                                                   tokenizer: Tokenizer) -> None:
    assert STRATEGIES["hugrag"].inputs({**CONFIG, "entity_seeds": "ppr"})["chunks"] == "chunks"
    question = "Who is Gamma?"
    mmr = strategy(tmp_path, tokenizer, causal_filter=False).retrieve(
        question, VECTOR)
    walked = ppr_seeded(tokenizer).retrieve(question, VECTOR)
    # MMR's hybrid score prefers ALPHA (nearest the question vector); the walk starts
    # at GAMMA, the entity the question names; module seeds are MMR's in both
    assert mmr.trace["seeds"][0] == "ALPHA" and walked.trace["seeds"][0] == "GAMMA"
    assert walked.trace["ppr_seeds"] == {"GAMMA": 1.0}
    assert mmr.trace["seeds"][1:] == walked.trace["seeds"][1:]


def test_ppr_entity_seeds_fall_back_to_mmr_when_no_entity_is_named(tokenizer: Tokenizer) -> None:
    context = ppr_seeded(tokenizer).retrieve("Why does it drive things?", VECTOR)
    assert "MMR entity seeds" in context.trace["fallback"]
    assert context.trace["seeds"][0] == "ALPHA" and "ppr_seeds" not in context.trace
