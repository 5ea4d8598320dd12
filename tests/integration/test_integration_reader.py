"""Extractive answers on real documents with the real Gemma 3 270M: the project's own
``docs/*.md``, a PDF made here from one page of them (a page per part) and a DOCX made
from another. Every answer that is a span occurs verbatim in each unit it cites, and
``kgrag query`` names the file and page of the unit it cites."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.answer import INSUFFICIENT
from kgrag.cli import main
from kgrag.contents.answers import read_answers, read_citations
from kgrag.contents.chunks import read_chunks
from kgrag.corpus.sources import chunk_sources
from tests.conftest import REPO, write_spec
from tests.corpus.test_corpus_documents import docx_bytes, pdf_bytes

pytestmark = pytest.mark.integration

PAGE_LINES = 30  # lines of docs/methods/ppr.md per PDF page


def latin(text: str) -> str:
    """The PDF's core font writes Latin-1 only."""
    return text.encode("latin-1", "replace").decode("latin-1")


def docs_folder(root: Path) -> int:
    """``root/docs``: docs/*.md as they are, ppr.md as a PDF and baselines.md as a DOCX;
    returns the PDF page that states the walk's damping."""
    folder = root / "docs"
    folder.mkdir()
    for page in sorted((REPO / "docs").glob("*.md")):
        shutil.copy(page, folder / page.name)
    lines = (REPO / "docs" / "methods" / "ppr.md").read_text().splitlines()
    pages = ["\n".join(lines[i:i + PAGE_LINES]) for i in range(0, len(lines), PAGE_LINES)]
    (folder / "ppr.pdf").write_bytes(pdf_bytes([latin(p) for p in pages],
                                               title="Graph search by personalised PageRank"))
    damping = next(n for n, page in enumerate(pages, 1) if "damping 0.5" in page)
    paragraphs = [p.replace("\n", " ") for p in
                  (REPO / "docs" / "methods" / "baselines.md").read_text().split("\n\n")
                  if p.strip() and not p.startswith(("#", "```"))]
    (folder / "baselines.docx").write_bytes(docx_bytes([("Baselines", paragraphs)]))
    return damping


QUESTIONS = [
    {"id": "pdf", "question": "What damping does the sparse power iteration of ppr use?",
     "answers": ["0.5"], "supporting": ["ppr.pdf"]},
    {"id": "docx", "question": "Which library does the bm25 strategy run over the units?",
     "answers": ["bm25s"], "supporting": ["baselines.docx"]},
    {"id": "md", "question": "Which runtime runs the onnx-int8 embedder backend?",
     "answers": ["ONNX Runtime"], "supporting": ["embedding-backends.md"]},
]


def test_extractive_answers_on_real_documents_cite_units_that_hold_them(project, capsys):
    damping_page = docs_folder(project)
    (project / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    spec = write_spec(
        project, corpus={"dataset": "documents", "path": "../docs",
                         "questions_file": "../questions.jsonl"},
        models={"llm": {"model": "gemma3-270m", "n_ctx": 4096}},
        query=[{"name": "dense", "strategy": "naive", "budget_tokens": 600}],
        answer={"mode": "extractive", "cite": True},
        evaluate={"metrics": ["f1", "coverage", "cited", "citation_precision",
                              "citation_precision_answer"]})
    result = api.run(spec, echo=lambda line: None)
    session = api.open_session(spec)
    chunks = read_chunks(session.artefact("chunks"))
    text_of = dict(zip(chunks["chunk_id"], chunks["context"]))
    answers = dict(read_answers(session.artefact("answer.dense"))
                   .select("question_id", "answer").iter_rows())
    citations = read_citations(session.artefact("answer.dense"))
    spans = 0
    for qid, units in citations.select("question_id", "cited_units").iter_rows():
        if answers[qid] not in (INSUFFICIENT, "yes", "no"):
            spans += 1
            assert units and all(answers[qid] in text_of[u] for u in units), qid
    assert spans == len(QUESTIONS)  # none is a yes/no question, and each context has spans
    row = result.metrics["rows"][0]
    assert row["cited"] == 1.0 and row["citation_precision_answer"] is not None

    # kgrag query: the evidence with file and page, then the answer, then the cited
    # passage with the span marked; the PDF's units name their page
    assert main(["query", str(spec), QUESTIONS[0]["question"]]) == 0
    out = capsys.readouterr().out
    answer = next(line for line in out.splitlines() if line.startswith("answer: "))
    evidence = out[:out.index(answer)]  # printed before the answer: units with their files
    assert re.search(r"  \([\w./-]+\.(pdf|md|docx)[,)]", evidence), evidence
    assert all(re.search(r"ppr\.pdf, pp?\. \d", line)  # a PDF's unit names its page
               for line in evidence.splitlines() if "ppr.pdf" in line), evidence
    cited = out.split(answer, 1)[1].strip().splitlines()
    heads, passages = cited[0::2], cited[1::2]  # "[n] title, source  (unit)", the passage
    units = [head.rsplit("(", 1)[1].rstrip(")") for head in heads]
    sources = chunk_sources(chunks)
    assert units and all(sources[u] in head for u, head in zip(units, heads))
    assert all("»" in p and "«" in p for p in passages)
    if answer.startswith("answer: 0.5 "):  # the right span: a PDF unit citing it is its page
        for row in chunks.filter(pl.col("chunk_id").is_in(units)).iter_rows(named=True):
            assert row["file"] != "ppr.pdf" or row["page"] <= damping_page <= row["page_end"]
