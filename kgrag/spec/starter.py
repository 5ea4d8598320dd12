"""``kgrag init``: a first spec for a corpus, commented section by section.

A newcomer has a folder of documents or a benchmark file and no spec. The spec written
here names the measured-best settings that need no LLM to build (the embedder through
OpenVINO int8, spaCy extraction, dense, BM25, their fusion and personalised PageRank),
answers by extraction with citations, and evaluates when there are questions; each
section says in a comment what it does and where it is described, so the file is its
own first lesson. It is validated before it is written: a spec ``init`` writes runs as
written.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kgrag.configuration import find_root
from kgrag.corpus.detect import Detected, detect
from kgrag.errors import KgragError
from kgrag.pipeline.artefacts import write_text_atomic
from kgrag.spec.load import check_spec

BUDGET = 1000  # context tokens per strategy: what the bundled reader was measured at
TRIPLE_BUDGET = 600  # a KGQA context of triples, as specs/reg_webqsp.yaml
FIRST_ANSWERS = 30  # answers cost LLM time; retrieval metrics still cover every question
NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Starter:
    """What ``kgrag init`` wrote: the spec's path and what it detected at the corpus path
    (its dataset shape, the questions file it found, notes on one it left out)."""

    path: Path
    detected: Detected


def write_starter(corpus: Path, out: Path | None = None, *, force: bool = False) -> Starter:
    """Write a commented spec for ``corpus`` to ``out`` (default: ``<corpus name>.yaml``
    in the current folder); an existing file is kept unless ``force``."""
    found = detect(corpus)
    out = (Path(out) if out is not None else Path(f"{run_name(found.path)}.yaml")).absolute()
    if out.exists() and not force:
        raise KgragError(f"{out} exists; pass --force to overwrite it")
    if out.is_dir():
        raise KgragError(f"{out} is a folder; name the spec file to write")
    outputs = find_root(out.parent) / "outputs"
    if found.path.is_dir() and found.path in out.parents:
        raise KgragError(f"write the spec outside {found.path} (-o ../{out.name}): it would "
                         "be read as a document of the corpus")
    if found.path.is_dir() and found.path in (outputs, *outputs.parents):
        raise KgragError(f"the run's outputs ({outputs}) would be inside {found.path}, and "
                         "read as documents of it: write the spec in a project of its own")
    out.parent.mkdir(parents=True, exist_ok=True)
    text = starter_text(found, out)
    staged = out.with_name(f".init-{out.name}")  # checked where it will live: paths resolve
    try:
        write_text_atomic(staged, text)
        problems = check_spec(staged)
        if problems:  # a bug of this module, never the user's: say so plainly
            raise AssertionError("kgrag init wrote an invalid spec:\n" + "\n".join(problems))
        os.replace(staged, out)
    finally:
        staged.unlink(missing_ok=True)
    return Starter(out, found)


def run_name(path: Path) -> str:
    """A run name from the corpus's file or folder name (``name``'s pattern, 64 at most)."""
    stem = path.name.removesuffix(".jsonl") if path.is_file() else path.name
    return NAME.sub("-", stem).lstrip("_.-")[:64] or "corpus"


def _relative(path: Path, spec: Path) -> str:
    """``path`` as the spec names it: relative to the spec's folder, in YAML quotes."""
    return json.dumps(Path(os.path.relpath(path, spec.parent)).as_posix())


def starter_text(found: Detected, spec: Path) -> str:
    """The spec for ``found``, to be written at ``spec``."""
    name = run_name(found.path)
    outputs = find_root(spec.parent) / "outputs" / name
    sections = [_header(found, spec, name, outputs), _corpus(found, spec), _models(found)]
    if found.dataset != "kgqa":
        sections += [_chunking(found), _graph()]
    sections += [_query(found), _answer(found), _evaluate(found)]
    return "\n\n".join(section.strip("\n") for section in sections) + "\n"


def _header(found: Detected, spec: Path, name: str, outputs: Path) -> str:
    what = {"documents": "the documents in", "jsonl": "the documents of",
            "holisqa": "the HolisQA domain", "kgqa": "the KGQA questions of"}.get(
        found.dataset, f"the {found.dataset} questions of")
    return f"""\
# A first spec for {what} {found.path.name}, written by `kgrag init`.
#   kgrag run {spec.name}                 build the index (and evaluate, with questions)
#   kgrag query {spec.name} "a question"  answer one, showing the evidence
#   kgrag graph {spec.name} -o graph.graphml   the graph, for Gephi, Cytoscape or networkx
# Outputs go to {os.path.relpath(outputs, spec.parent)}. Every key and its default:
# schemas/pipeline.schema.json of kgrag; what each section does: kgrag's docs/spec.md.
name: {name}
description: {json.dumps(f"{found.dataset} corpus {found.path.name}, kgrag init's defaults")}"""


def _corpus(found: Detected, spec: Path) -> str:
    path = _relative(found.path, spec)
    if found.dataset == "documents":
        lead = ("# A folder of documents (PDF, HTML, Markdown, DOCX, text), read recursively;\n"
                "# each chunk keeps its file, page and heading, which answers cite.")
    elif found.dataset == "jsonl":
        lead = "# One document per line of a JSON Lines file."
    elif found.dataset == "holisqa":
        lead = ("# A HolisQA domain: its articles (sentences.jsonl) and questions (qa.jsonl),\n"
                "# whose gold sentences context_recall checks.")
    elif found.dataset == "kgqa":
        lead = ("# Questions over a knowledge graph (WebQSP's shape): the graph is every line's\n"
                "# gold triples; the documents a strategy ranks are its triples.")
    else:
        lead = (f"# A {found.dataset} file: each line a question with its own paragraphs, the\n"
                "# corpus being all of them.")
    keys = [f"dataset: {found.dataset}", f"path: {path}"]
    if found.fields:
        keys.append("fields: {" + ", ".join(f"{k}: {json.dumps(v)}"
                                            for k, v in found.fields.items()) + "}")
    lead += "\n# Paths are relative to this file."
    if found.questions_file is not None:
        keys.append(f"questions_file: {_relative(found.questions_file, spec)}")
        lead += ("\n# Your questions (one {id, question, answers, supporting} per line) turn on\n"
                 "# answers and the evaluation; supporting names documents by their "
                 + ("path in the folder." if found.dataset == "documents" else "id."))
    elif found.dataset in ("documents", "jsonl"):
        lead += ("\n# No questions file was found, so nothing is evaluated: `kgrag run` builds\n"
                 "# the index and `kgrag query` answers. To evaluate, write questions.jsonl,\n"
                 '# one {"id": "q1", "question": "…", "answers": ["…"], "supporting": ["…"]}\n'
                 "# per line, name it here as questions_file and uncomment evaluate below.")
    return f"{lead}\ncorpus: {{{', '.join(keys)}}}"


def _models(found: Detected) -> str:
    reader = ("# The LLM only answers here: nothing else calls it. Gemma 3 270M is bundled;\n"
              "# a path to any .gguf file works, and a bigger model answers better.")
    return f"""\
{reader}
# The embedder runs through OpenVINO int8: 2.85x torch's speed at equal recall on a
# CPU with int8 instructions (avx512_vnni or avx_vnni in /proc/cpuinfo); without them
# `backend: openvino` is faster (docs/embedding-backends.md). The first run exports
# it once (a minute or two on two cores); `backend: torch` skips the export.
models:
  llm: {{model: gemma3-270m, n_ctx: 8192, temperature: 0, seed: 0}}
  embedder: {{model: all-MiniLM-L6-v2, backend: openvino-int8}}"""


def _chunking(found: Detected) -> str:
    if found.dataset == "holisqa":
        return """\
# Chunks of 256 tokens (the embedder's), 32 shared with the next; no title line:
# HolisQA's titles are bare article ids, which extraction would take for entities.
chunking: {size: 256, overlap: 32, title: false}"""
    return """\
# Chunks of 256 tokens (the embedder's), 32 shared with the next; each starts with
# its document's title.
chunking: {size: 256, overlap: 32}"""


def _graph() -> str:
    return """\
# The graph, with no LLM: spaCy's named entities and noun phrases in every chunk and
# the relations its parse finds between them (docs/spec.md, extraction methods). An
# `entities` build is that graph alone: what ppr walks and `kgrag graph` writes out.
extraction: {method: nlp}
graphs:
  - {name: entities, kind: entities}"""


def _query(found: Detected) -> str:
    if found.dataset == "kgqa":
        return f"""\
# Two ways to rank a question's triples (the triples within 2 hops of its topic
# entities), each filling {TRIPLE_BUDGET} tokens: embedding cosine, and BM25 over their text
# (docs/methods/reg.md). `kgrag query` uses the first; --strategy NAME another.
query:
  - {{name: cosine, strategy: triple_cosine, budget_tokens: {TRIPLE_BUDGET}}}
  - {{name: bm25, strategy: triple_bm25, budget_tokens: {TRIPLE_BUDGET}}}"""
    return f"""\
# Four ways to find the evidence, each filling {BUDGET:,} tokens of context:
#   dense   the chunks nearest the question by embedding: the baseline to beat
#   bm25    the chunks sharing the question's rarer words
#   fusion  both rankings fused by reciprocal rank
#   ppr     personalised PageRank from the question's entities over the graph
#           (HippoRAG); it gains most where names link passages (docs/methods/ppr.md)
# `kgrag query` uses the first; --strategy ppr (any name) another.
query:
  - {{name: dense, strategy: naive, budget_tokens: {BUDGET}}}
  - {{name: bm25, strategy: bm25, budget_tokens: {BUDGET}}}
  - {{name: fusion, strategy: fusion, fuse: [dense, bm25], budget_tokens: {BUDGET}}}
  - {{name: ppr, strategy: ppr, entities: entities, budget_tokens: {BUDGET}}}"""


def _first_answers(found: Detected) -> tuple[str, str]:
    """The ``questions`` key and its comment when there are more questions than a first
    run should answer."""
    if found.questions is None or found.questions <= FIRST_ANSWERS:
        return "", ""
    why = (f"\n# Answers only the first {FIRST_ANSWERS} of the {found.questions:,} questions "
           "(each answer is\n# LLM time; retrieval is scored on all): drop `questions` to "
           "answer every one.")
    return f", questions: {FIRST_ANSWERS}", why


def _answer(found: Detected) -> str:
    limit, why = _first_answers(found)
    if found.dataset == "kgqa":
        return (f"# Answers as 'ans:' lines, one per answer entity (docs/methods/reg.md).{why}\n"
                f"answer: {{length: list{limit}}}")
    if found.dataset == "holisqa":
        return ("# HolisQA's answers are a few sentences, so the LLM writes them (an extractive\n"
                "# answer is one span) and cites the chunks it used by number "
                f"(docs/documents.md).{why}\nanswer: {{length: long, cite: true{limit}}}")
    return ("# Each answer is a span of the evidence, chosen by the LLM, citing the chunks that\n"
            "# hold it: a citation true by construction (docs/documents.md, cited answers)."
            f"{why}\nanswer: {{mode: extractive, cite: true{limit}}}")


METRICS = {
    "kgqa": "[recall@5, answer_coverage, hit, hit@1, macro_f1, micro_f1]",
    "holisqa": "[f1, context_recall, recall@5, cited, citation_precision]",
}
CHUNK_METRICS = "[em, f1, coverage, recall@5, cited, citation_precision, citation_precision_answer]"


def _evaluate(found: Detected) -> str:
    metrics = METRICS.get(found.dataset, CHUNK_METRICS)
    lead = """\
# Scores per strategy (docs/spec.md, metrics): em and f1 of the answers; coverage, the
# gold answer in the context; recall@5, supporting documents among the first five;
# cited, citation_precision (cited chunks from a supporting document) and
# citation_precision_answer (cited chunks holding the gold answer)."""
    if found.dataset == "kgqa":
        lead = ("# Scores per strategy (docs/methods/reg.md): recall@5 of gold triples, the gold\n"
                "# answers the context names, and hit / F1 of the 'ans:' lines.")
    elif found.dataset == "holisqa":
        lead = ("# Scores per strategy: f1 of the long answers, context_recall (gold sentences\n"
                "# inside the context), recall@5 of the gold articles, and the citations.")
    section = f"evaluate:\n  metrics: {metrics}"
    if found.dataset in ("documents", "jsonl") and found.questions_file is None:
        return lead + "\n" + "\n".join(f"# {line}" for line in section.splitlines())
    return f"{lead}\n{section}"
