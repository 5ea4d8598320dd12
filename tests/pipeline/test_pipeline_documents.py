"""A documents folder (a PDF, an HTML page, a DOCX file made here) run end to end: its
chunks keep their sources, answers cite numbered chunks, the citation metrics score
them against the supporting documents, and ``kgrag query`` resolves each citation."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.cli import main
from kgrag.contents.answers import read_citations
from kgrag.contents.chunks import read_chunks
from tests.conftest import write_spec
from tests.corpus.test_corpus_documents import docx_bytes, pdf_bytes
from tests.standin import RuleLLM, open_with, run_with

QUESTIONS = [
    {"id": "q1", "question": "In which city is the Louvre?", "answers": ["Paris"],
     "supporting": ["louvre.pdf"]},
    {"id": "q2", "question": "In which country is the Prado?", "answers": ["Spain"],
     "supporting": ["prado.html"]},
    {"id": "q3", "question": "Which river flows past the Uffizi?", "answers": ["Arno"],
     "supporting": ["uffizi.docx"]},
]


def documents_spec(project: Path, **answer) -> Path:
    folder = project / "museums"
    folder.mkdir()
    (folder / "louvre.pdf").write_bytes(pdf_bytes(
        ["The Louvre is a museum in Paris.", "It opened in 1793."], title="Louvre"))
    (folder / "prado.html").write_text("<title>Prado</title><h1>Madrid</h1>"
                                       "<p>The Prado is a museum in Madrid, Spain.</p>")
    (folder / "uffizi.docx").write_bytes(docx_bytes(
        [("Florence", ["The Uffizi is a gallery in Florence, by the Arno."])]))
    (folder / "notes.odt").write_bytes(b"an unsupported file")
    (project / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return write_spec(
        project, corpus={"dataset": "documents", "path": "../museums",
                         "questions_file": "../questions.jsonl"},
        chunking={"size": 16, "overlap": 4},
        query=[{"name": "dense", "strategy": "naive", "budget_tokens": 60}],
        answer=answer,
        evaluate={"metrics": ["recall@2", "cited", "citation_precision",
                              "citation_precision_answer", "citation_recall"]})


def test_answers_cite_numbered_chunks_and_are_scored(project):
    spec = documents_spec(project, cite=True)
    steps, rows, _ = run_with(spec, RuleLLM())
    notes = steps["corpus"]["notes"]
    assert {k: notes[k] for k in ("files", "converted", "cached", "skipped",
                                  "skipped_unsupported")} == {
        "files": 4, "converted": 3, "cached": 0, "skipped": 1, "skipped_unsupported": 1}
    session = api.open_session(spec)
    chunks = read_chunks(session.artefact("chunks"))
    louvre = chunks.filter(pl.col("file") == "louvre.pdf")
    assert louvre["page"].to_list()[0] == 1 and louvre["page_end"].to_list()[-1] == 2
    assert chunks.filter(pl.col("file") == "prado.html")["heading"].to_list() == ["Madrid"]
    assert {k: steps["answer.dense"]["notes"][k] for k in ("cited", "uncited", "unparsed")} == {
        "cited": 3, "uncited": 0, "unparsed": 0}
    citations = read_citations(session.artefact("answer.dense"))
    assert citations.height == 3 and all(citations["cited_units"].list.len() > 0)
    row = rows["dense"]
    assert row["cited"] == 1.0
    assert 0 < row["citation_precision"] <= 1 and 0 < row["citation_recall"] <= 1
    # the stand-in cites the chunks naming the question's words: every supporting one
    assert row["citation_recall"] == 1.0


@pytest.mark.parametrize("reply, unparsed", [("[9] Paris", 0), ("Paris", 3)])
def test_answers_without_a_valid_citation_are_counted_not_errors(project, monkeypatch, reply,
                                                                 unparsed):
    monkeypatch.setattr(RuleLLM, "citing", staticmethod(lambda prompt: reply))
    steps, rows, _ = run_with(documents_spec(project, cite=True), RuleLLM())
    row = rows["dense"]
    assert (row["n_answered"], row["cited"], row["citation_recall"]) == (3, 0.0, 0.0)
    assert row["citation_precision"] is None  # no answer cites: no precision to average
    notes = steps["answer.dense"]["notes"]
    assert (notes["uncited"], notes["unparsed"]) == (3, unparsed)


def test_without_cite_the_citation_metrics_are_not_reported(project):
    spec = documents_spec(project)
    _, rows, _ = run_with(spec, RuleLLM())
    assert rows["dense"]["cited"] is None and rows["dense"]["citation_precision"] is None
    assert read_citations(api.open_session(spec).artefact("answer.dense")) is None
    assert "cite" not in api.open_session(spec).plan.by_name()["answer.dense"].config


def test_query_resolves_each_citation_to_title_file_and_page(project, monkeypatch, capsys):
    spec = documents_spec(project, cite=True)
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    assert main(["query", str(spec), "In which city is the Louvre?"]) == 0
    out = capsys.readouterr().out
    assert "Louvre  (louvre.pdf, pp. 1-2)" in out  # a unit and where it came from
    answer = next(line for line in out.splitlines() if line.startswith("answer: "))
    assert answer.startswith("answer: An answer from the evidence [")
    cited = out.split(answer, 1)[1].strip().splitlines()
    assert cited and cited[0].startswith("[1] Louvre, louvre.pdf, pp. 1-2")


@pytest.mark.parametrize("reply, cited, numbers", [
    ("[2][1] Paris", [2, 1], [2, 1]),
    (" [3] [1] Paris.", [3, 1], [3, 1]),
    ("Paris [2][1]", [2, 1], [2, 1]),
    ("Paris [1] [1].", [1], [1, 1]),
    ("Paris [7]", [], [7]),
    ("Paris", [], []),
    ("Insufficient information.", [], []),
])
def test_a_reply_without_a_valid_citation_is_counted_not_an_error(reply, cited, numbers):
    from kgrag.answer import parse_citations

    parsed = parse_citations(reply, 3)
    assert (parsed.cited, parsed.numbers) == (cited, numbers)
    assert parsed.text in ("Paris", "Insufficient information.")


def test_the_report_links_each_citation_to_its_unit(project):
    from kgrag.report.page import write_report

    spec = documents_spec(project, cite=True)
    run_with(spec, RuleLLM())
    page = write_report(api.open_session(spec).run_dir).read_text()
    links = re.findall(r'<a href="#(q\d+-s0-\d+)">\[(\d+)\]</a>', page)
    assert len(links) >= 3  # every question's answer cites at least one unit
    for target, number in links:
        assert target.endswith(f"-{number}") and f'<li id="{target}"' in page


def test_the_citation_grammar_compiles_and_admits_only_numbers_shown():
    from llama_cpp import LlamaGrammar

    from kgrag.answer import citation_grammar

    for length in ("short", "long"):
        LlamaGrammar.from_string(citation_grammar(12, length), verbose=False)
    assert '"[" ("3" | "2" | "1") "]"' in citation_grammar(3, "short")


def test_extractive_answers_are_spans_of_the_units_they_cite(project):
    """Every extractive answer (other than the escape) is verbatim in each unit it cites,
    and the answer-level precision scores what the cited units say."""
    spec = documents_spec(project, cite=True, mode="extractive")
    steps, rows, _ = run_with(spec, RuleLLM())
    session = api.open_session(spec)
    answers = dict(zip(*pl.read_parquet(session.artefact("answer.dense") / "answers.parquet")
                       .select("question_id", "answer").to_dict().values()))
    citations = read_citations(session.artefact("answer.dense"))
    text_of = dict(zip(*read_chunks(session.artefact("chunks")).select(
        "chunk_id", "context").to_dict().values()))
    for qid, units, texts in citations.select("question_id", "cited_units",
                                              "cited_texts").iter_rows():
        assert units, f"{qid}: an extractive span answer cites the units that hold it"
        assert all(answers[qid] in text_of[u] and text_of[u] == t for u, t in zip(units, texts))
    assert steps["answer.dense"]["notes"]["answers_span"] == 3
    row = rows["dense"]
    assert row["cited"] == 1.0 and row["citation_precision_answer"] is not None


def test_an_extractive_context_without_candidates_gets_the_escape_counted(project, monkeypatch):
    from kgrag.answer import extractive

    monkeypatch.setattr(extractive, "candidates", lambda units, question, limit, docs: [])
    spec = documents_spec(project, cite=True, mode="extractive")
    steps, rows, _ = run_with(spec, RuleLLM())
    assert steps["answer.dense"]["notes"]["answers_escape"] == 3
    assert rows["dense"]["cited"] == 0.0


def test_the_gold_context_oracle_answers_from_the_supporting_documents(project):
    spec = documents_spec(project, mode="extractive", context="gold")
    llm = RuleLLM()
    _, rows, _ = run_with(spec, llm)
    answers = pl.read_parquet(api.open_session(spec).artefact("answer.dense") / "answers.parquet")
    # each question's own document holds its answer, and the stand-in scores a candidate by
    # its words in the context: every candidate ties, the prior's first wins
    assert answers.height == 3 and rows["dense"]["n_answered"] == 3
    assert "logprob" in llm.calls


def test_the_gold_context_without_supporting_labels_is_refused_by_validate(project, capsys):
    spec = write_spec(project, corpus={"dataset": "text", "path": "../notes"},
                      query=[{"name": "dense", "strategy": "naive"}],
                      answer={"context": "gold"}, evaluate={"metrics": ["f1"]})
    (project / "notes").mkdir()
    (project / "notes" / "a.txt").write_text("Paris is the capital of France.\n")
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "answer.context: gold answers from" in err
    assert "no supporting labels" in err


@pytest.mark.parametrize("dataset, counts", [
    ("documents", {"files": 2, "converted": 1, "skipped": 1, "skipped_outside": 1}),
    ("text", {"skipped": 1, "skipped_outside": 1})])
def test_a_link_out_of_the_folder_reaches_neither_the_chunks_nor_a_bundle(project, tmp_path,
                                                                          dataset, counts):
    """``kgrag run`` then ``kgrag bundle`` on a folder holding ``passwd.txt`` that leads
    to a file outside it: skipped and counted, not shipped; followed only when asked."""
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:a line from outside the folder\n")
    folder = project / "notes"
    folder.mkdir()
    (folder / "louvre.md").write_text("# Louvre\n\nThe Louvre is a museum in Paris.\n")
    (folder / "passwd.txt").symlink_to(secret)
    corpus = {"dataset": dataset, "path": "../notes"}
    query = [{"name": "dense", "strategy": "naive", "budget_tokens": 60}]
    spec = write_spec(project, corpus=corpus, query=query)
    assert main(["run", str(spec)]) == 0
    session = api.open_session(spec)
    assert not any("root:x" in text for text in read_chunks(session.artefact("chunks"))["text"])
    manifest = json.loads((session.run_dir / "manifest.json").read_text())
    notes = next(step["notes"] for step in manifest["steps"] if step["name"] == "corpus")
    assert {key: notes[key] for key in notes if key not in (
        "documents", "questions", "sentences", "triples", "decompositions", "cached")} == counts
    bundle = tmp_path / "notes.tar.gz"
    assert main(["bundle", str(spec), "-o", str(bundle)]) == 0
    with tarfile.open(bundle) as tar:
        shipped = {info.name: tar.extractfile(info).read() for info in tar}
    assert "project/notes/louvre.md" in shipped and "project/notes/passwd.txt" not in shipped
    assert not any(b"root:x" in data for data in shipped.values())
    followed = write_spec(project, "followed", corpus={**corpus, "follow_links": True},
                          query=query)
    assert main(["run", str(followed)]) == 0
    chunks = read_chunks(api.open_session(followed).artefact("chunks"))
    assert any("root:x" in text for text in chunks["text"])


def test_a_removed_document_skips_its_question_and_a_path_is_printed_once(
        project, monkeypatch, capsys, caplog):
    """A question whose supporting file was deleted is left out and counted; a file
    without a title of its own is named by its path once in ``kgrag query``."""
    spec = documents_spec(project, cite=True)
    (project / "museums" / "manuals").mkdir()
    (project / "museums" / "manuals" / "hours.pdf").write_bytes(pdf_bytes(
        ["The Louvre closes on Tuesdays."]))
    gone = {"id": "q4", "question": "When does the Orsay close?", "answers": ["Monday"],
            "supporting": ["manuals/orsay.html"]}
    with (project / "questions.jsonl").open("a") as out:
        out.write(json.dumps(gone) + "\n")
    with caplog.at_level("WARNING"):
        steps, rows, _ = run_with(spec, RuleLLM())
    assert steps["corpus"]["notes"]["questions_skipped_missing_support"] == 1
    assert "q4 ('manuals/orsay.html')" in caplog.text
    assert rows["dense"]["n_answered"] == 3
    session = open_with(spec, RuleLLM())
    monkeypatch.setattr(api, "open_session", lambda path: session)
    assert main(["query", str(spec), "When does the Louvre close on Tuesdays?"]) == 0
    out = capsys.readouterr().out
    assert "manuals/hours.pdf  (p. 1)" in out
    assert re.search(r"\[\d\] manuals/hours\.pdf, p\. 1  \(", out)
    assert "manuals/hours.pdf, manuals/hours.pdf" not in out
