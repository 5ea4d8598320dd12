"""The joint training set of ARK at scale: the training halves of the three multi-hop
samples together, as one plain corpus that a spec trains on.

    python benchmarks/ark_joint_corpus.py [--out outputs/ark-joint-corpus]

Writes ``documents.jsonl`` (every document of musique_200, hotpotqa_200 and 2wiki_200,
ids prefixed with the sample's name, so the candidates and the hard negatives come from
all three) and ``questions.jsonl`` (the questions of each sample's training half only:
``kgrag.eval.halves``' dev half, the split ``train_fraction: 0.5, split_seed: 0`` trains
on, with their supporting documents). specs/scale/ark_joint.yaml trains on every question
of the file; each sample's held-back half is then evaluated in its own corpus
(specs/scale/ark_joint_<sample>.yaml, ``benchmarks/graph_search.py`` for the halves).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kgrag.corpus.importers import load_corpus
from kgrag.eval.halves import halves

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"musique": "musique_200.jsonl", "hotpotqa": "hotpotqa_200.jsonl",
           "2wiki": "2wiki_200.jsonl"}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default=str(ROOT / "outputs" / "ark-joint-corpus"))
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    documents, questions = [], []
    for sample, name in SAMPLES.items():
        corpus = load_corpus({"dataset": sample, "path": name, "limit": None,
                              "questions": None}, Path(args.data))
        train = halves(corpus.questions["question_id"])["dev"]
        documents += [{"id": f"{sample}:{d}", "title": t, "text": x}
                      for d, t, x in corpus.documents.select("doc_id", "title", "text")
                      .iter_rows()]
        kept = [q for q in corpus.questions.iter_rows(named=True) if q["question_id"] in train]
        questions += [{"id": f"{sample}:{q['question_id']}", "question": q["question"],
                       "answers": q["answers"],
                       "supporting": [f"{sample}:{d}" for d in q["supporting_doc_ids"]]}
                      for q in kept]
        print(f"{sample}: {corpus.documents.height} documents, {len(kept)} of "
              f"{corpus.questions.height} questions (the training half)")
    for file, rows in (("documents.jsonl", documents), ("questions.jsonl", questions)):
        (out / file).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(documents)} documents, {len(questions)} questions -> {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
