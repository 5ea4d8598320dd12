"""Write a scale corpus from real text only: needle questions with their own paragraphs,
hidden among distractor passages of real documentation, deterministic for a seed.

    python benchmarks/scale_corpus.py --size 10k [--seed 0] [--half test|dev]
        [--out outputs/scale-corpus/10k]

The needles are test-half questions (``kgrag.eval.halves``; ``--half dev`` takes the
dev half's, to choose a setting on before the test half's report it) of the shared
MuSiQue, HotpotQA and 2Wiki samples, taken in a seeded order, round robin over the
three, until their own paragraphs (the 10 or 20 each question comes with, gold and
distractor alike) reach ``NEEDLE_DOCS``: one eleventh of 10,000, so that the same
needles sit among 1× (``--size 1x``), 10× (``10k``), 100× (``100k``) and 1000× (``1m``;
the installed text holds about 245×, below) as many distractor passages as their own
paragraphs. The distractors are passages of about one chunk (``PASSAGE_WORDS``, under
the specs' 256-token chunks, so a passage is one chunk) cut at paragraph breaks from
text Debian installs (``apt-get install linux-doc python3-doc dict-gcide``): the
kernel's documentation, Python's documentation sources, the GCIDE dictionary and the
English manual pages (troff markup stripped), deduplicated by text.
A size that needs more passages than that text holds gets each of them once, no more:
a copy would be the same (title, text), which kgrag's import reads and drops, so a
folder of copies builds the same corpus and only makes its import read lines it
discards. The seeded order is the one the copies would have had (each passage at its
first place), so the corpus is the one the tiled folder built. The folder's
``corpus.json`` says how many distractors the size asked for and how many it holds.

The folder holds ``documents.jsonl`` (``id``, ``title``, ``text``), ``questions.jsonl``
(``id``, ``question``, ``answers``, ``supporting``: a ``jsonl`` corpus's
``questions_file``) and ``corpus.json``; documents are written in a seeded order, a line
at a time, so a 1M folder is written without holding it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgrag.corpus.importers import load_corpus
from kgrag.eval.halves import halves

SAMPLES = {"musique": "musique_200.jsonl", "hotpotqa": "hotpotqa_200.jsonl",
           "2wiki": "2wiki_200.jsonl"}
NEEDLE_DOCS = 10_000 // 11
SIZES = {"1x": 2 * NEEDLE_DOCS, "10k": 10_000, "100k": 100_000, "1m": 1_000_000}
PASSAGE_WORDS = (60, 150)  # a passage closes at the first paragraph break past 60 words
DOC = Path("/usr/share/doc")

_TROFF_TEXT_MACROS = {"SH", "SS", "B", "I", "BR", "IR", "BI", "RB", "RI", "IB", "IP", "TP"}
_TROFF_ESCAPE = re.compile(r"\\(f(\[[^\]]*\]|\(..|.)|\(..|\*(\(..|\[[^\]]*\]|.)|[&|^0/,%]|s[-+]?\d)")


def _paragraphs(text: str) -> Iterator[str]:
    for block in re.split(r"\n\s*\n", text):
        words = " ".join(block.split())
        if words:
            yield words


def _troff_text(source: str) -> str:
    """A manual page's words: text lines kept, the text macros' arguments kept, every
    other request dropped, a paragraph macro a break, font and character escapes gone."""
    lines = []
    for line in source.splitlines():
        if line.startswith((".", "'")):
            macro, _, rest = line[1:].strip().partition(" ")
            if macro in _TROFF_TEXT_MACROS and rest:
                lines += ["", rest.replace('"', "")] if macro in {"SH", "SS"} else [rest]
            elif macro in {"PP", "P", "LP", "sp", "SH", "SS"}:
                lines.append("")
            continue
        lines.append(line)
    text = _TROFF_ESCAPE.sub("", "\n".join(lines))
    return text.replace("\\-", "-").replace("\\e", "\\")


def _read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def sources() -> Iterator[tuple[str, str]]:
    """(title, paragraph) of every installed text, in a fixed order."""
    kernel = sorted(p for d in DOC.glob("linux-doc-*/Documentation") for p in d.rglob("*")
                    if p.name.endswith((".rst.gz", ".rst", ".txt", ".txt.gz")))
    python = sorted(p for d in DOC.glob("python3*/html/_sources") for p in d.rglob("*.txt"))
    for prefix, files in (("kernel", kernel), ("python", python)):
        for path in files:
            for paragraph in _paragraphs(_read(path)):
                yield f"{prefix}: {path.name.split('.')[0]}", paragraph
    gcide = Path("/usr/share/dictd/gcide.dict.dz")
    if gcide.exists():
        text = gzip.decompress(gcide.read_bytes()).decode("utf-8", "replace")
        for paragraph in _paragraphs(text):
            yield "gcide", paragraph
    for page in sorted(Path("/usr/share/man").glob("man[1-9]*/*.gz")):
        for paragraph in _paragraphs(_troff_text(_read(page))):
            yield f"man: {page.name.removesuffix('.gz')}", paragraph


def passages() -> list[tuple[str, str]]:
    """(title, text) passages of about one chunk, paragraphs joined in their file's order
    until past ``PASSAGE_WORDS[0]`` words (a longer paragraph cut at ``PASSAGE_WORDS[1]``),
    each distinct text once."""
    seen: set[bytes] = set()
    out: list[tuple[str, str]] = []
    title, words = "", []

    def close() -> None:
        text = " ".join(words)
        key = hashlib.blake2b(text.encode(), digest_size=12).digest()
        if len(words) >= PASSAGE_WORDS[0] // 2 and key not in seen:
            seen.add(key)
            out.append((title, text))
        words.clear()

    for source, paragraph in sources():
        if source != title:
            close()
            title = source
        split = paragraph.split()
        while len(split) > PASSAGE_WORDS[1]:
            words += split[:PASSAGE_WORDS[1]]
            split = split[PASSAGE_WORDS[1]:]
            close()
        words += split
        if len(words) >= PASSAGE_WORDS[0]:
            close()
    close()
    return out


def needles(data: Path, seed: int, half: str = "test") -> tuple[list[dict], list[dict]]:
    """(documents, questions): questions of one half, round robin over the samples in a
    seeded order, with their own paragraphs, until those reach ``NEEDLE_DOCS``."""
    queues = []
    for sample, name in SAMPLES.items():
        ids = load_corpus({"dataset": sample, "path": name, "limit": None, "questions": None},
                          data).questions["question_id"].to_list()
        test = sorted(halves(ids, seed)[half],
                      key=lambda q: hashlib.sha256(f"{seed}\0{q}".encode()).hexdigest())
        queues.append((sample, name, test))
    chosen: dict[str, list[str]] = {sample: [] for sample in SAMPLES}
    documents: dict[str, dict] = {}
    questions: list[dict] = []
    for rank in range(max(len(q) for _, _, q in queues)):
        for sample, name, test in queues:
            if len(documents) >= NEEDLE_DOCS or rank >= len(test):
                continue
            corpus = load_corpus({"dataset": sample, "path": name, "limit": None,
                                  "questions": [test[rank]]}, data)
            for doc_id, title, text in corpus.documents.iter_rows():
                documents[f"{sample}:{doc_id}"] = {"id": f"{sample}:{doc_id}", "title": title,
                                                   "text": text}
            row = corpus.questions.row(0, named=True)
            questions.append({"id": f"{sample}:{row['question_id']}",
                              "question": row["question"], "answers": row["answers"],
                              "supporting": [f"{sample}:{d}" for d in row["supporting_doc_ids"]]})
            chosen[sample].append(row["question_id"])
    return list(documents.values()), questions


def write(out: Path, size: str, seed: int, data: Path, added: int = 0,
          half: str = "test") -> dict:
    """Write the ``size`` corpus into ``out``; return what ``corpus.json`` says of it.
    ``added`` more distractors follow the size's documents, as if added to its folder
    later (the passages after the size's own in the seeded pool); the needles are questions
    of ``half``."""
    needle_docs, questions = needles(data, seed, half)
    pool = passages()
    rng = random.Random(seed)
    rng.shuffle(pool)
    wanted = max(SIZES[size] - len(needle_docs), 0)
    order = [("n", i) for i in range(len(needle_docs))] + [("d", i) for i in range(wanted)]
    rng.shuffle(order)
    order += [("d", i) for i in range(wanted, wanted + added)]
    out.mkdir(parents=True, exist_ok=True)
    written: set[int] = set()
    with (out / "documents.jsonl").open("w") as handle:
        for kind, i in order:
            if kind == "n":
                doc = needle_docs[i]
            elif (at := i % len(pool)) in written:  # past the pool: a copy, not written
                continue
            else:
                written.add(at)
                doc = {"id": f"d{at}", "title": pool[at][0], "text": pool[at][1]}
            handle.write(json.dumps(doc) + "\n")
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    summary = {"size": size, "seed": seed, "half": half,
               "documents": len(needle_docs) + len(written),
               "needle_questions": len(questions), "needle_documents": len(needle_docs),
               "distractors": len(written), "added": added,
               "ratio": round(min(wanted, len(pool)) / len(needle_docs), 1),
               "distinct_passages_available": len(pool),
               "distractors_asked": wanted + added,
               "distractors_short": wanted + added - len(written)}
    (out / "corpus.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", choices=list(SIZES), default="10k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--half", choices=("test", "dev"), default="test",
                        help="the half whose questions are the needles")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out or ROOT / "outputs" / "scale-corpus" / args.size)
    summary = write(out, args.size, args.seed, Path(args.data), half=args.half)
    print(json.dumps(summary))
    if summary["distractors_short"]:
        print(f"short: the size asks for {summary['distractors_asked']:,} distractors; "
              f"{summary['distinct_passages_available']:,} distinct passages are installed "
              "here, each written once")


if __name__ == "__main__":
    main(sys.argv[1:])
