"""What a rerun costs after documents are added to or removed from a folder corpus.

    python benchmarks/incremental_rebuild.py [--share 0.05] [--work /tmp/kgrag-incremental]
                                             [--limit N]

musique_200's paragraphs become a ``documents`` folder (one Markdown file per paragraph,
its title as the heading; ``chunking.title: false``, so a unit reads as in the benchmark),
its questions a questions file naming their supporting files. One spec builds a dense
index, an ``nlp`` entities build and a bipartite build, and retrieves with ``naive``,
``ppr`` and ``ket`` (keywords only), retrieval only.

1. cold: the base folder, a fresh project and cache;
2. add: ``share`` more documents (paragraphs of hotpotqa_200, the same kind of text)
   copied into the same folder, rerun with the same cache;
3. remove: the added files and ``share`` of the base's non-supporting paragraphs
   deleted, rerun with the same cache;
4. cold builds of the grown and the shrunk folder, each in a fresh project and cache,
   whose metrics the reruns must equal.

Prints each run's wall time, its steps' wall times, and the reruns' share of the cold
build's time; exits 1 if a rerun's metrics differ from the cold build's.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import time
from pathlib import Path

import polars as pl

from kgrag import api
from kgrag.contents.metrics import read_metrics
from kgrag.corpus import load_corpus

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SPEC = {
    "name": "incremental",
    "corpus": {"dataset": "documents", "path": "../docs", "questions_file": "../questions.jsonl"},
    "chunking": {"size": 256, "overlap": 32, "title": False},
    "extraction": {"method": "nlp"},
    "graphs": [{"name": "nlp-kg", "kind": "entities"},
               {"name": "keywords", "kind": "bipartite", "tau": 0}],
    "query": [{"name": "dense", "strategy": "naive", "budget_tokens": 2000},
              {"name": "ppr", "strategy": "ppr", "entities": "nlp-kg", "budget_tokens": 2000},
              {"name": "keyword", "strategy": "ket", "bipartite": "keywords", "theta": 0,
               "budget_tokens": 2000}],
    "answer": {"questions": 0},
    "evaluate": {"metrics": ["coverage", "recall@2", "recall@5"]},
}
TIMING = re.compile(r"(_ms_|_s$|wall)")


def paragraphs(path: Path, dataset: str) -> pl.DataFrame:
    cfg = {"dataset": dataset, "path": str(path), "limit": None, "questions": None}
    return load_corpus(cfg, path.parent).documents


def file_name(doc_id: str) -> str:
    return f"{doc_id}.md"


def write_document(folder: Path, row: dict) -> None:
    (folder / file_name(row["doc_id"])).write_text(f"# {row['title']}\n\n{row['text']}\n")


def project(root: Path, base: pl.DataFrame, questions: list[dict]) -> Path:
    """A fresh project (own cache folder) holding the base folder; returns its spec."""
    if root.exists():
        shutil.rmtree(root)
    (root / "specs").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'incremental'\n")
    for row in base.iter_rows(named=True):
        write_document(root / "docs", row)
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    spec = {**SPEC, "cache": {"dir": "../cache"}}
    path = root / "specs" / "incremental.yaml"
    path.write_text(json.dumps(spec, indent=2))
    return path


def run(spec: Path, label: str) -> tuple[float, dict]:
    started = time.perf_counter()
    result = api.run(spec, echo=lambda line: None)
    wall = time.perf_counter() - started
    steps = {s["name"]: round(s.get("wall_s", 0.0), 1) for s in result.manifest.steps}
    print(f"{label}: {wall:.1f} s; steps: " + ", ".join(
        f"{name} {seconds}" for name, seconds in steps.items() if seconds >= 0.5), flush=True)
    return wall, read_metrics(spec.parent.parent / "outputs" / "incremental")


def comparable(metrics: dict) -> list[dict]:
    """The metrics rows without timings (what must be identical)."""
    return [{k: v for k, v in row.items() if not TIMING.search(k)} for row in metrics["rows"]]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--share", type=float, default=0.05)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kgrag-incremental"))
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N questions and their paragraphs (a smoke run)")
    args = parser.parse_args(argv)
    corpus_cfg = {"dataset": "musique", "path": str(DATA / "musique_200.jsonl"),
                  "limit": args.limit, "questions": None}
    musique = load_corpus(corpus_cfg, DATA)
    base = musique.documents
    n = round(args.share * base.height)
    supporting = {d for ids in musique.questions["supporting_doc_ids"] for d in ids}
    extra = paragraphs(DATA / "hotpotqa_200.jsonl", "hotpotqa").filter(
        ~pl.col("doc_id").is_in(base["doc_id"].to_list())).head(n)
    removable = sorted(set(base["doc_id"]) - supporting)
    removed = set(random.Random(0).sample(removable, n))
    questions = [{"id": q["question_id"], "question": q["question"], "answers": q["answers"],
                  "supporting": [file_name(d) for d in q["supporting_doc_ids"]]}
                 for q in musique.questions.iter_rows(named=True)]
    print(f"base: {base.height} documents; add {extra.height}; remove {len(removed)}; "
          f"{len(questions)} questions", flush=True)

    spec = project(args.work / "growing", base, questions)
    cold_s, _ = run(spec, "cold (base)")
    for row in extra.iter_rows(named=True):
        write_document(spec.parent.parent / "docs", row)
    add_s, added = run(spec, f"add {extra.height}")
    for doc_id in [*extra["doc_id"], *removed]:
        (spec.parent.parent / "docs" / file_name(doc_id)).unlink()
    remove_s, shrunk = run(spec, f"remove {len(removed)}")

    grown_spec = project(args.work / "grown", pl.concat([base, extra]), questions)
    grown_s, grown_cold = run(grown_spec, "cold (grown)")
    kept = base.filter(~pl.col("doc_id").is_in(list(removed)))
    shrunk_spec = project(args.work / "shrunk", kept, questions)
    shrunk_s, shrunk_cold = run(shrunk_spec, "cold (shrunk)")

    same_add = comparable(added) == comparable(grown_cold)
    same_remove = comparable(shrunk) == comparable(shrunk_cold)
    print(f"add: {add_s:.1f} s = {add_s / grown_s:.1%} of its cold build ({grown_s:.1f} s); "
          f"metrics identical: {same_add}")
    print(f"remove: {remove_s:.1f} s = {remove_s / shrunk_s:.1%} of its cold build "
          f"({shrunk_s:.1f} s); metrics identical: {same_remove}")
    print(f"cold build of the base: {cold_s:.1f} s")
    for row in comparable(added):
        print("  grown:", {k: v for k, v in row.items()
                           if k in ("strategy", "coverage", "recall@2", "recall@5")})
    return 0 if same_add and same_remove else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
