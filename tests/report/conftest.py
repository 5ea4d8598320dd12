"""One finished run for the report tests, made once: a tiny MuSiQue spec with every
section of the report in it (sweeps of the budget, β and θ; skeleton, keyword and
hierarchy builds; KET-RAG and HugRAG; answers), run with the stand-in LLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgrag.report.page import write_report
from tests.conftest import make_project, write_spec
from tests.standin import RuleLLM, run_with

GRAPHS = [{"name": "skel", "kind": "skeleton", "beta": [0.2, 0.4]},
          {"name": "kw", "kind": "bipartite"},
          {"name": "h", "kind": "hierarchy", "max_cluster_size": 4, "gate_min_similarity": 0.0}]
QUERY = [{"name": "dense", "strategy": "naive", "budget_tokens": [300, 600]},
         {"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
          "theta": [0, 0.5], "budget_tokens": 600},
         {"name": "hug", "strategy": "hugrag", "hierarchy": "h", "budget_tokens": 600}]


def report_spec(project: Path) -> Path:
    return write_spec(project, "report",
                      corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 2},
                      graphs=GRAPHS, query=QUERY, answer={"questions": 2},
                      evaluate={"metrics": ["em", "f1", "coverage", "recall@2", "recall@5"]})


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of ``report_spec``, run with its own cache."""
    root = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGRAG_CACHE_DIR", str(root / "kgrag-cache"))
        run_with(report_spec(make_project(root / "proj")), RuleLLM())
    return root / "proj" / "outputs" / "report"


@pytest.fixture(scope="session")
def report_page(finished_run: Path) -> Path:
    return write_report(finished_run)
