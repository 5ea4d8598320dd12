"""Fuzz every shipped spec: each seeded mutant must end in success or one ``KgragError``.

    python benchmarks/spec_fuzz.py                   # 1,000 mutants, seed 0
    python benchmarks/spec_fuzz.py --mutants 100 --seed 3
    python benchmarks/spec_fuzz.py --kind replies    # a model server's replies instead
    python benchmarks/spec_fuzz.py --kind bundles    # a bundle's index, members and bytes
    python benchmarks/spec_fuzz.py --kind documents  # real documents damaged, and bombs

Each mutant is a spec under specs/ (all of them, in turn) with one or two mutations:
a key deleted, a value of another type, a number out of range (or past what a run can
use), a string ending in a line break or holding a control character, an unknown key, a
huge thread count, a number or boolean that YAML 1.1 and 1.2 read differently, a metric
cut-off past any corpus, a value nested deep, or a bad corpus (a symbolic-link loop, a
line nested 100,000 deep, a folder, a FIFO, an empty, binary or non-UTF-8 file, rows
that cannot be asked, surrogate or oversized JSON values, a path no system takes). It
runs ``kgrag validate`` and then ``kgrag run --dry-run`` through the CLI's ``main``,
error handler included; a mutant whose corpus changed and that plans also runs the run's
first step, the corpus import. Prints the count of each outcome, and each failure: an
exception past the error handler, a traceback printed, a dry run that plans what
validation refused, or a step still running after ``--limit`` seconds. Exits 1 if there
was any.

``--kind replies`` fuzzes what a model server answers instead (``reply_fuzz``);
``--kind bundles`` what ``kgrag replay`` is given (``bundle_fuzz``); ``--kind documents``
the files of a documents folder (``document_fuzz``).
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import signal
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"
SHARED = REPO.parent / "shared" / "data"

Data = dict[str, Any]
KeyPath = tuple[Any, ...]

# Values that replace a scalar or a whole section; the marked ones are written as YAML
# text (``TEXT``), as a user would type them.
OTHER_TYPES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1.5, "", "x", "x" * 300, [], [1, 1], {}, {"a": 1},
    float("nan"), float("inf"), 10**400, "\0", "~nobody-here/x", "../" * 30,
)
OUT_OF_RANGE: tuple[Any, ...] = (-1, 0, -(10**9), 10**9, 2**63, 1e308, -0.5, 0.5, 1e-300,
                                 10**20, 2**64, 99_999_999_999, 10**29)
THREADS: tuple[Any, ...] = (0, -1, 1025, 10**6, 10**9, 2**64, 1.5, "all")
TEXT = {  # marker value -> the YAML text written in its place
    "@octal@": "0400", "@sexagesimal@": "4:16", "@negative-octal@": "-010",
    "@sexagesimal-float@": "1:30.5", "@binary@": "0b100000000", "@underscored@": "1_024",
    "@underscored-float@": "1_0.5", "@deep-list@": "[" * 5000 + "]" * 5000,
    "@deep-map@": "{a: " * 5000 + "1" + "}" * 5000,
    "@yes@": "yes", "@no@": "No", "@on@": "ON", "@off@": "off",
}
AMBIGUOUS_NUMBERS = ("@octal@", "@sexagesimal@", "@negative-octal@", "@sexagesimal-float@",
                     "@binary@", "@underscored@", "@underscored-float@")
AMBIGUOUS_BOOLEANS = ("@yes@", "@no@", "@on@", "@off@")
CONTROL_CHARACTERS = ("\n", "\r\n", "\t", "\x1b", "\x85", "\u2028")
UNKNOWN_KEYS = ("zzz", "nmae", "corpse", "n_thread", "chunkng", "strategy ", "@")


class Hung(BaseException):
    """A step outlived ``--limit``: raised by the timer, caught by nothing in kgrag."""


def leaves(data: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every value with its key path, parents before children."""
    yield path, data
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from leaves(value, (*path, index))


def put(data: Data, path: KeyPath, value: Any) -> None:
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value


def delete_key(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    keyed = [path for path, _ in leaves(data) if path and not isinstance(path[-1], int)]
    path = rng.choice(keyed)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]


def other_type(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    path = rng.choice([path for path, _ in leaves(data) if path])
    put(data, path, copy.deepcopy(rng.choice(OTHER_TYPES + ("@deep-list@", "@deep-map@"))))


def out_of_range(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    numbers = [path for path, value in leaves(data)
               if isinstance(value, (int, float)) and not isinstance(value, bool)]
    if numbers:
        put(data, rng.choice(numbers), rng.choice(OUT_OF_RANGE))


def line_break(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    """A string, a name or a path when there is one, ends in a line break or another
    control character (or holds one)."""
    texts = [(path, value) for path, value in leaves(data) if path and isinstance(value, str)]
    named = [(path, value) for path, value in texts
             if path[-1] in ("name", "path", "model", "embedder", "base", "dir", "outputs")]
    path, value = rng.choice(named if named and rng.random() < 0.7 else texts)
    control = rng.choice(CONTROL_CHARACTERS)
    put(data, path, rng.choice((value + control, value + "\n\n", control + value,
                                value[:1] + control + value[1:])))


def unknown_key(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    mappings = [value for _, value in leaves(data) if isinstance(value, dict)]
    rng.choice(mappings)[rng.choice(UNKNOWN_KEYS)] = rng.choice((1, "x", None, {}))


def huge_threads(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    models = data.setdefault("models", {})
    if not isinstance(models, dict):
        return
    llm = models.setdefault("llm", {})
    if isinstance(llm, dict):
        llm["n_threads"] = rng.choice(THREADS)


def ambiguous_number(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    numbers = [path for path, value in leaves(data)
               if isinstance(value, (int, float)) and not isinstance(value, bool)]
    put(data, rng.choice(numbers) if numbers else ("chunking",), rng.choice(AMBIGUOUS_NUMBERS))


def ambiguous_boolean(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    """A boolean (chunking.title when the spec sets none) written yes / no / on / off."""
    booleans = [path for path, value in leaves(data) if isinstance(value, bool)]
    if not booleans and not isinstance(data.get("chunking", {}), dict):
        return
    path = rng.choice(booleans) if booleans else ("chunking", "title")
    if not booleans:
        data.setdefault("chunking", {})
    put(data, path, rng.choice(AMBIGUOUS_BOOLEANS))


def huge_cut_off(data: Data, rng: random.Random, _bad: dict[str, Path]) -> None:
    """A recall@k or hit@k whose k no corpus reaches."""
    evaluate = data.setdefault("evaluate", {})
    if isinstance(evaluate, dict):
        evaluate["metrics"] = [rng.choice(("recall@", "hit@"))
                               + rng.choice(("10000", "99999999999999999999", "1" + "0" * 400))]


def bad_corpus(data: Data, rng: random.Random, bad: dict[str, Path]) -> None:
    """The corpus path (or the questions file) names one of the bad corpora; the dataset
    sometimes changes to one that reads such a file."""
    corpus = data.get("corpus")
    if not isinstance(corpus, dict):
        data["corpus"] = corpus = {"dataset": "musique"}
    kind = rng.choice(sorted(bad))
    key = "questions_file" if kind.startswith("questions") else "path"
    if key == "questions_file":
        corpus["dataset"] = "jsonl"
        corpus["path"] = str(bad["documents"])
    elif kind.startswith("documents") or rng.random() < 0.3:
        corpus["dataset"] = "jsonl" if kind.startswith("documents") else rng.choice(
            ("musique", "hotpotqa", "2wiki", "holisqa", "kgqa", "jsonl", "text"))
    corpus[key] = str(bad[kind])


MUTATIONS: tuple[Callable[[Data, random.Random, dict[str, Path]], None], ...] = (
    delete_key, other_type, other_type, out_of_range, out_of_range, line_break, line_break,
    unknown_key, huge_threads, ambiguous_number, ambiguous_boolean, huge_cut_off,
    bad_corpus, bad_corpus, bad_corpus,
)


def bad_corpora(folder: Path, rng: random.Random) -> dict[str, Path]:
    """Corpora a user might point a spec at by mistake, or a damaged copy of a real one."""
    folder.mkdir()
    (folder / "loop").symlink_to("loop")
    os.mkfifo(folder / "fifo.jsonl")
    (folder / "empty-folder").mkdir()
    musique = [json.loads(line) for line in
               (SHARED / "musique_200.jsonl").read_text(encoding="utf-8").splitlines()[:2]]

    def musique_with(change: Callable[[Data], None]) -> str:
        row = copy.deepcopy(musique[1])
        change(row)
        return "\n".join(json.dumps(r) for r in (musique[0], row)) + "\n"

    texts: dict[str, str | bytes] = {
        "deep.jsonl": '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
        "deep-object.jsonl": '{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n",
        "empty.jsonl": "",
        "binary.jsonl": bytes(rng.randrange(256) for _ in range(4096)),
        "latin1.jsonl": '{"id": "caf\xe9"}\n'.encode("latin-1"),
        "array.jsonl": "[1, 2]\n",
        "no-paragraphs.jsonl": musique_with(lambda row: row.update(paragraphs=[])),
        "empty-question.jsonl": musique_with(lambda row: row.update(question="")),
        "support-idx.jsonl": musique_with(
            lambda row: row["question_decomposition"][0].update(paragraph_support_idx=99)),
        "support-idx-null.jsonl": musique_with(
            lambda row: row["question_decomposition"][0].update(paragraph_support_idx=None)),
        "support-idx-float.jsonl": musique_with(
            lambda row: row["question_decomposition"][0].update(paragraph_support_idx=3.0)),
        "idx-text.jsonl": musique_with(lambda row: row["paragraphs"][0].update(idx="zero")),
        "empty-answer.jsonl": musique_with(lambda row: row.update(answer="", answer_aliases=[])),
        "blank-paragraphs.jsonl": musique_with(
            lambda row: [p.update(paragraph_text="") for p in row["paragraphs"]]),
        # surrogate or oversized JSON values: json.dumps writes a lone surrogate as \ud800
        "surrogate-answer.jsonl": musique_with(lambda row: row.update(answer="x\ud800")),
        "surrogate-id.jsonl": musique_with(lambda row: row.update(id="\udfff")),
        "surrogate-title.jsonl": musique_with(
            lambda row: row["paragraphs"][3].update(title="T\udc80")),
        "surrogate-alias.jsonl": musique_with(lambda row: row.update(answer_aliases=["\ud83d"])),
        "surrogate-key.jsonl": musique_with(lambda row: row.update({"\ud800": 1})),
        "huge-integer.jsonl": musique_with(lambda row: row.update(answer="@huge@")).replace(
            '"@huge@"', "9" * 5000),
        "huge-float.jsonl": musique_with(lambda row: row.update(answer="@huge@")).replace(
            '"@huge@"', "1e99999"),
        "huge-question.jsonl": musique_with(lambda row: row.update(question="why " * 500_000)),
        "documents-surrogate.jsonl": '{"id": "a", "text": "Paris\\ud800"}\n',
        "documents-raw-surrogate.jsonl": b'{"id": "a", "text": "Paris \xed\xa0\x80"}\n',
        "documents-huge-id.jsonl": '{"id": ' + "7" * 5000 + ', "text": "Lyon."}\n',
        "documents-huge-text.jsonl": json.dumps({"id": "a", "text": "word " * 2_000_000}) + "\n",
        "questions-surrogate.jsonl": '{"id": "q", "question": "x\\udc80", "answers": ["x"]}\n',
        "documents.jsonl": '{"id": "a", "text": "Paris is in France."}\n',
        "documents-object-id.jsonl": '{"id": {"a": 1}, "text": "Lyon."}\n',
        "questions-empty.jsonl": '{"id": "q", "question": " ", "answers": ["x"]}\n',
        "questions-deep.jsonl": '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
    }
    paths = {"loop": folder / "loop", "loop-inside": folder / "loop" / "inside.jsonl",
             "fifo": folder / "fifo.jsonl", "folder": folder / "empty-folder",
             "missing": folder / "missing.jsonl", "long-name": folder / ("c" * 300),
             "nobody-home": Path("~nobody-here/corpus.jsonl")}
    for name, text in texts.items():
        path = folder / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        paths[name.removesuffix(".jsonl")] = path
    return paths


def shipped_specs() -> list[tuple[str, Data]]:
    """Every spec under specs/, its corpus paths made absolute (mutants live elsewhere)."""
    found = []
    for path in sorted(SPECS.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for key in ("path", "questions_file"):
            if key in data["corpus"]:
                data["corpus"][key] = str((path.parent / data["corpus"][key]).resolve())
        found.append((str(path.relative_to(SPECS)), data))
    return found


def mutant_text(data: Data) -> str:
    """The mutant as YAML, each marker replaced by the text it stands for."""
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    for marker, written in TEXT.items():
        text = text.replace(marker, written)
    return text


def run_cli(argv: list[str], limit: float) -> tuple[int, str]:
    """``kgrag`` with ``argv`` in this process: its exit code and what it wrote to stderr."""
    from kgrag.cli import main

    err = io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return code, err.getvalue()


def import_corpus(path: Path, limit: float) -> str:
    """Run the spec's first step, the corpus import, as ``kgrag run`` does: "imported", or
    "import refused" for a ``KgragError``."""
    from kgrag import api
    from kgrag.errors import KgragError
    from kgrag.pipeline.runner import run_plan

    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        session = api.open_session(path)
        try:
            run_plan(session.plan, spec=session.spec, models=session.models,
                     run_dir=session.run_dir, steps=session.plan.upstream(["corpus"]),
                     echo=lambda _: None)
        finally:
            session.cache.close()
    except KgragError:
        return "import refused"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return "imported"


def outcome(path: Path, corpus_changed: bool, limit: float) -> str:
    """What became of one mutant; anything but the outcomes in ``GOOD`` is a failure,
    raised as ``AssertionError`` (an escaped exception propagates as itself)."""
    code, err = run_cli(["validate", str(path)], limit)
    valid = code == 0
    if code not in (0, 2) or "Traceback" in err:
        raise AssertionError(f"validate exited {code}: {err[-2000:]}")
    code, err = run_cli(["run", "--dry-run", str(path)], limit)
    if code not in (0, 2) or "Traceback" in err or (code == 2) != err.startswith("kgrag: error:"):
        raise AssertionError(f"run --dry-run exited {code}: {err[-2000:]}")
    if code == 0 and not valid:
        raise AssertionError("run --dry-run planned a spec that validate refused")
    if code == 2:
        return "validate refused" if not valid else "dry-run refused"
    return import_corpus(path, limit) if corpus_changed else "planned"


GOOD = ("validate refused", "dry-run refused", "planned", "import refused", "imported")


def fuzz(mutants: int, seed: int, limit: float, echo: Callable[[str], None] = print
         ) -> tuple[Counter[str], Counter[str], list[str]]:
    """Run ``mutants`` mutants: outcome counts, mutation counts, and the failures."""
    specs = shipped_specs()
    with tempfile.TemporaryDirectory(prefix="kgrag-fuzz-") as folder:
        root = Path(folder)
        os.environ["KGRAG_CACHE_DIR"] = str(root / "cache")  # never the user's cache
        project = root / "project"
        (project / "specs").mkdir(parents=True)
        (project / "pyproject.toml").write_text("[project]\nname = 'fuzz'\n")
        bad = bad_corpora(project / "bad", random.Random(seed))
        signal.signal(signal.SIGALRM, _hang)
        outcomes, applied, failures = Counter(), Counter(), []
        for number in range(mutants):
            name, data = specs[number % len(specs)]
            rng = random.Random(f"{seed}:{number}")
            data, done = copy.deepcopy(data), []
            corpus_before = copy.deepcopy(data["corpus"])
            for mutation in rng.sample(MUTATIONS, rng.randint(1, 2)):
                mutation(data, rng, bad)
                done.append(mutation.__name__)
            applied.update(done)
            path = project / "specs" / f"mutant-{number}.yaml"
            path.write_text(mutant_text(data), encoding="utf-8")
            try:
                result = outcome(path, data.get("corpus") != corpus_before, limit)
            except Hung:
                result = "hung"
                failures.append(f"#{number} {name} ({', '.join(done)}): still running after "
                                f"{limit:g} s")
            except BaseException as exc:  # what the fuzz looks for: anything past main
                if isinstance(exc, KeyboardInterrupt):
                    raise
                result = "failed"
                failures.append(f"#{number} {name} ({', '.join(done)}): "
                                f"{''.join(traceback.format_exception(exc, limit=-4))}"
                                f"mutant: {path.read_text(encoding='utf-8')[:400]!r}")
            outcomes[result] += 1
            path.unlink()
            if (number + 1) % 100 == 0:
                echo(f"{number + 1} mutants: {dict(outcomes)}")
    return outcomes, applied, failures


def _hang(_signum: int, _frame: Any) -> None:
    raise Hung


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=60.0,
                        help="seconds one command may take before the mutant counts as hung")
    parser.add_argument("--kind", choices=("specs", "replies", "bundles", "documents"),
                        default="specs",
                        help="what is mutated: the shipped specs, a model server's "
                             "replies (benchmarks/reply_fuzz.py), a bundle "
                             "(benchmarks/bundle_fuzz.py), or a documents folder's files "
                             "(benchmarks/document_fuzz.py)")
    args = parser.parse_args()
    if args.kind == "replies":
        import reply_fuzz

        return reply_fuzz.report(args.mutants, args.seed, min(args.limit, 15.0))
    if args.kind == "bundles":
        import bundle_fuzz

        return bundle_fuzz.report(args.mutants, args.seed, args.limit)
    if args.kind == "documents":
        import document_fuzz

        return document_fuzz.report(args.mutants, args.seed, args.limit)
    outcomes, applied, failures = fuzz(args.mutants, args.seed, args.limit)
    specs = len(shipped_specs())
    print(f"\n{args.mutants} mutants of {specs} shipped specs (seed {args.seed})")
    print("mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(applied.items())))
    for result in (*GOOD, "failed", "hung"):
        print(f"  {result:<17} {outcomes[result]:>6}")
    for failure in failures:
        print(f"\nFAILED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
