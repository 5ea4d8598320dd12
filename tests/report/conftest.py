"""Finished runs for the report tests, each made once: a tiny MuSiQue spec with every
section of the report in it (sweeps of the budget, β and θ; skeleton, keyword and
hierarchy builds; KET-RAG, HugRAG and a PPR walk; answers), run with the stand-in LLM; and a folder
of documents (a PDF, Markdown, a file that gives no text) whose questions are answered
with citations copied from the units cited; and that folder without questions."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF

from kgrag import api
from kgrag.cli import main
from kgrag.report.page import write_report
from tests.conftest import make_project, write_spec
from tests.standin import RuleLLM, open_with, run_with

GRAPHS = [{"name": "skel", "kind": "skeleton", "beta": [0.2, 0.4]},
          {"name": "kw", "kind": "bipartite"},
          {"name": "h", "kind": "hierarchy", "max_cluster_size": 4, "gate_min_similarity": 0.0}]
QUERY = [{"name": "dense", "strategy": "naive", "budget_tokens": [300, 600]},
         {"name": "ket", "strategy": "ket", "skeleton": "skel", "bipartite": "kw",
          "theta": [0, 0.5], "budget_tokens": 600},
         {"name": "hug", "strategy": "hugrag", "hierarchy": "h", "budget_tokens": 600},
         {"name": "ppr", "strategy": "ppr", "hierarchy": "h", "budget_tokens": 600}]


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


PAGES = ["The Louvre is a museum in Paris. It opened in 1793 and holds the Mona Lisa.",
         "The Orsay is a museum in Paris too. It shows impressionist paintings."]
RIVERS = ("# Rivers of France\n\n## Rhone\n\nThe Rhone flows through Lyon and reaches the "
          "Mediterranean Sea.\n\n## Loire\n\nThe Loire is the longest river in France.\n")
QUESTIONS = [{"id": "louvre", "question": "Where is the Louvre?", "answers": ["Paris"],
              "supporting": ["guide.pdf"]},
             {"id": "rhone", "question": "Which city does the Rhone flow through?",
              "answers": ["Lyon"], "supporting": ["rivers.md"]}]


def documents_folder(folder: Path) -> Path:
    """A museum guide as a two-page PDF (fpdf2), a Markdown page with headings, and a
    file that gives no text."""
    folder.mkdir(parents=True)
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.set_title("Museum guide")
    for text in PAGES:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    (folder / "guide.pdf").write_bytes(bytes(pdf.output()))
    (folder / "rivers.md").write_text(RIVERS)
    (folder / "broken.docx").write_bytes(b"not a zip at all")
    return folder


class QuotingLLM(RuleLLM):
    """Cites as the rule stand-in does, and answers with words copied from the first
    passage it cites, as an extractive answer is a span of a cited unit."""

    @staticmethod
    def citing(prompt: str) -> str:
        cited = RuleLLM.citing(prompt)
        first = int(re.match(r"\[(\d+)\]", cited).group(1))
        context = prompt.rsplit("Context:\n", 1)[1].rsplit("\n\nQuestion: ", 1)[0]
        passage = re.split(r"\n\n(?=\[\d+\] )", context)[first - 1]
        words = passage.split("\n", 1)[1].split()  # the text under the title line
        return f"{cited.split(' ', 1)[0]} {' '.join(words[2:6])}"


def documents_spec(project: Path, **sections: Any) -> Path:
    documents_folder(project / "docs")
    return write_spec(project, "docs",
                      corpus={"dataset": "documents", "path": "../docs", **sections.pop(
                          "corpus", {})},
                      chunking={"size": 32, "overlap": 4}, **sections)


@pytest.fixture(scope="session")
def cited_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A documents folder asked two questions, answered with citations by
    ``QuotingLLM``: the run folder."""
    root = tmp_path_factory.mktemp("cited")
    project = make_project(root / "proj")
    (project / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    spec = documents_spec(project, corpus={"questions_file": "../questions.jsonl"},
                          query=[{"name": "dense", "strategy": "naive", "budget_tokens": 200}],
                          answer={"cite": True}, evaluate={"metrics": ["em", "cited"]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGRAG_CACHE_DIR", str(root / "kgrag-cache"))
        run_with(spec, QuotingLLM())
    return project / "outputs" / "docs"


@pytest.fixture(scope="session")
def browse_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The documents folder without questions and with a keyword graph, run by
    ``kgrag run``: the run folder and what the command printed."""
    root = tmp_path_factory.mktemp("browse")
    spec = documents_spec(make_project(root / "proj"),
                          graphs=[{"name": "kw", "kind": "bipartite"}])
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGRAG_CACHE_DIR", str(root / "kgrag-cache"))
        session = open_with(spec, RuleLLM())
        patch.setattr(api, "open_session", lambda path: session)
        with contextlib.redirect_stdout(printed):
            assert main(["run", str(spec)]) == 0
    return spec.parent.parent / "outputs" / "docs", printed.getvalue()
