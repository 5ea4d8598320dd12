"""The manifest, the report's header and a bundle name the models a run used, and no
other: a spec's ``models.llm`` is always resolved, but a run that neither answers nor
builds with an LLM never calls it."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from kgrag.bundle.archive import INDEX
from kgrag.bundle.pack import make_bundle
from kgrag.report.page import write_report
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with, run_with

QUERY = [{"name": "dense", "strategy": "naive", "budget_tokens": 400},
         {"name": "lexical", "strategy": "bm25", "budget_tokens": 400}]
METRICS = {"metrics": ["coverage", "recall@2"]}


def header_models(run_dir: Path) -> str:
    """The models the report's summary line (under its title) names."""
    page = write_report(run_dir).read_text(encoding="utf-8")
    summary = re.search(r'</h1><p class="muted">(.*?)</p>', page).group(1)
    return summary.split(" · ")[3]  # dataset, spec, finished, models, kgrag version


def test_an_llm_free_run_names_no_llm(project: Path, tmp_path: Path) -> None:
    spec = write_spec(project, corpus={"dataset": "musique", "path": "../corpus.jsonl",
                                       "limit": 2},
                      extraction={"method": "nlp"}, query=QUERY, answer={"questions": 0},
                      evaluate=METRICS)
    llm = RuleLLM()
    run_with(spec, llm)
    assert llm.calls == []  # the run never called an LLM...
    run_dir = project / "outputs" / "tiny"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert set(manifest["models"]) == {"embedder"}  # ...and names none
    assert manifest["models"]["embedder"]["name"] == "all-MiniLM-L6-v2"
    assert header_models(run_dir) == "embedder all-MiniLM-L6-v2"
    bundle = make_bundle(open_with(spec, RuleLLM()), tmp_path / "run.tar.gz").path
    with tarfile.open(bundle) as tar:
        assert set(json.loads(tar.extractfile(INDEX).read())["models"]) == {"embedder"}


def test_a_run_that_answers_names_its_llm_even_when_all_is_reused(project: Path) -> None:
    spec = write_spec(project, corpus={"dataset": "musique", "path": "../corpus.jsonl",
                                       "limit": 2},
                      models={"llm": {"model": "smollm2-135m"}}, query=QUERY,
                      answer={"questions": 2}, evaluate=METRICS)
    run_dir = project / "outputs" / "tiny"
    for llm in (RuleLLM(), RuleLLM()):  # the second run reuses every artefact
        run_with(spec, llm)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        # the answering LLM, once: extraction is that same model, and built nothing here
        assert set(manifest["models"]) == {"llm", "embedder"}
        assert manifest["models"]["llm"]["name"] == "smollm2-135m"
        assert header_models(run_dir) == "llm smollm2-135m, embedder all-MiniLM-L6-v2"
    assert llm.calls == []  # answered from the cache: still the LLM's answers
