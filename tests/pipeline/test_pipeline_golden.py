"""Golden ``metrics.json`` snapshots: three small specs run end to end with the
rule-following stand-in LLM (``tests.standin.RuleLLM``), the real embedder and LanceDB,
and their metrics rows and build rows must equal ``golden/<spec>.json``.

Together the specs run every query strategy (naive, ket with local and ppr skeleton
search, knng, hybrid, hugrag with mmr and ppr entity seeds, bm25, ppr over a skeleton,
an entities build and a hierarchy, fusion), every extraction method (llm, nlp, hybrid)
and every graph kind (skeleton, bipartite, hierarchy, entities), so a refactor that
changes a number fails here even where no other test looks at it.

Only what the computation produces is compared: times (``retrieval_ms_*``,
``retrieval_llm_ms_p50``, ``wall_s``, ``chunks_per_min``) are left out, and floats are
rounded to 6 decimals. Rewriting the snapshots with ``python -m
tests.pipeline.test_pipeline_golden`` is legitimate only when a commit changes results on
purpose (a fixed bug, a new metric column, a changed stand-in or test corpus); say in
that commit which numbers moved and why. A refactor must leave them alone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_DATA, make_project, write_spec
from tests.standin import RuleLLM, run_with

GOLDEN = Path(__file__).with_name("golden")
# ppr's defaults as these snapshots were taken, before phrases: named and dense_seeds: 0.02
LANDED_PPR = {"phrases": "all", "dense_seeds": 0}
TIMES = {"retrieval_ms_p50", "retrieval_ms_p95", "retrieval_llm_ms_p50", "wall_s",
         "chunks_per_min"}


def musique_llm(project: Path) -> Path:
    """LLM extraction on MuSiQue: skeleton, bipartite and entities builds, and every
    strategy that reads them, answers included."""
    query = [
        {"name": "dense", "strategy": "naive", "budget_tokens": [300, 600]},
        {"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
         "theta": 0.4, "budget_tokens": 600},
        {"name": "ket-ppr", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
         "theta": 0.4, "skeleton_search": "ppr", "budget_tokens": 600},
        {"name": "keyword", "strategy": "ket", "bipartite": "kw", "theta": 0,
         "budget_tokens": 600},
        {"name": "knng", "strategy": "knng", "skeleton": "skel", "budget_tokens": 600},
        {"name": "hybrid", "strategy": "hybrid", "skeleton": "skel", "theta": 0.5,
         "budget_tokens": 600},
        {"name": "bm25", "strategy": "bm25", "budget_tokens": 600},
        {"name": "rrf", "strategy": "fusion", "fuse": ["dense", "bm25"], "budget_tokens": 600},
        {"name": "ppr", "strategy": "ppr", "skeleton": "skel", "budget_tokens": 600,
         **LANDED_PPR},
        {"name": "ppr-entities", "strategy": "ppr", "entities": "ents", "dense_seeds": 0.05,
         "budget_tokens": 600, "phrases": "all"},
    ]
    return write_spec(
        project, "musique-llm",
        corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 2},
        graphs=[{"name": "skel", "kind": "skeleton", "beta": 0.5},
                {"name": "kw", "kind": "bipartite"}, {"name": "ents", "kind": "entities"}],
        query=query, evaluate={"metrics": ["em", "f1", "coverage", "recall@2", "recall@5",
                                           "extraction"]})


def wiki_nlp(project: Path) -> Path:
    """spaCy extraction on a 2Wiki question with gold triples: KET-RAG's channels."""
    return write_spec(
        project, "wiki-nlp", corpus={"dataset": "2wiki", "path": "../2wiki.jsonl"},
        extraction={"method": "nlp"},
        graphs=[{"name": "skel", "kind": "skeleton", "beta": 1.0},
                {"name": "kw", "kind": "bipartite"}],
        query=[{"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
                "budget_tokens": 600},
               {"name": "local", "strategy": "ket", "skeleton": "skel", "theta": 1,
                "budget_tokens": 600}],
        answer={"questions": 0}, evaluate={"metrics": ["coverage", "recall@5", "extraction"]})


def holisqa_hybrid(project: Path) -> Path:
    """Hybrid extraction on a HolisQA slice: a hierarchy, HugRAG with either entity seeds
    and its ablations, ppr over the canonical entities, context recall and the structural
    metrics."""
    query = [
        {"name": "naive", "strategy": "naive", "budget_tokens": 600},
        {"name": "hug", "strategy": "hugrag", "hierarchy": "h", "budget_tokens": 600},
        {"name": "hug-ppr", "strategy": "hugrag", "hierarchy": "h", "entity_seeds": "ppr",
         "budget_tokens": 600},
        {"name": "hug-flat", "strategy": "hugrag", "hierarchy": "h", "use_hierarchy": False,
         "causal_filter": False, "budget_tokens": 600},
        {"name": "ppr", "strategy": "ppr", "hierarchy": "h", "budget_tokens": 600,
         **LANDED_PPR},
    ]
    return write_spec(
        project, "holisqa-hybrid",
        corpus={"dataset": "holisqa", "path": "../business", "limit": 2},
        chunking={"size": 128, "overlap": 16, "title": False},
        extraction={"method": "hybrid", "model": "smollm2-135m", "prompt": "chat"},
        graphs=[{"name": "h", "kind": "hierarchy", "max_cluster_size": 4,
                 "gate_min_similarity": 0.0}],
        query=query, answer={"length": "long"},
        evaluate={"metrics": ["em", "f1", "context_recall", "recall@5", "extraction"]})


SPECS = {"musique-llm": musique_llm, "wiki-nlp": wiki_nlp, "holisqa-hybrid": holisqa_hybrid}


def add_corpora(project: Path) -> None:
    """Put the 2Wiki question and the HolisQA domain the specs read beside the MuSiQue
    corpus of the ``project`` fixture."""
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        (project / "2wiki.jsonl").write_text(next(line for line in handle
                                                  if '"context"' in line))
    shutil.copytree(SHARED_DATA / "holisqa" / "business", project / "business")


def comparable(value: Any) -> Any:
    """``value`` without times, its floats rounded to 6 decimals."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return round(value, 6) if isinstance(value, float) else value


def snapshot(path: Path) -> dict[str, Any]:
    _, rows, builds = run_with(path, RuleLLM())
    return comparable({"rows": list(rows.values()), "builds": builds})


@pytest.fixture
def corpora(project: Path) -> Path:
    add_corpora(project)
    return project


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the specs read ../shared/data")
@pytest.mark.parametrize("name", SPECS)
def test_metrics_match_their_golden_snapshot(corpora: Path, name: str) -> None:
    recorded = json.loads((GOLDEN / f"{name}.json").read_text())
    assert snapshot(SPECS[name](corpora)) == recorded


def test_every_golden_snapshot_has_its_spec() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(SPECS)


def regenerate() -> None:
    """Rewrite every snapshot, each spec run in a fresh project and call cache as the
    test runs it."""
    GOLDEN.mkdir(exist_ok=True)
    for name, spec in SPECS.items():
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["KGRAG_CACHE_DIR"] = str(Path(tmp) / "kgrag-cache")
            project = make_project(Path(tmp) / "proj")
            add_corpora(project)
            (GOLDEN / f"{name}.json").write_text(
                json.dumps(snapshot(spec(project)), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    regenerate()
