"""How long ``kgrag validate`` and ``kgrag query`` take, each in a fresh process as a user
runs them, for one or more kgrag checkouts side by side.

    flock /tmp/kgrag-cpu.lock python benchmarks/query_latency.py
    flock /tmp/kgrag-cpu.lock python benchmarks/query_latency.py --tree /work/main --tree .

Each ``--tree`` (default: this checkout) is a kgrag checkout whose code runs:
``python -m kgrag.cli`` with the tree as working folder, so its ``kgrag`` is imported.
Every tree is given the same spec (``--spec``, default this checkout's quickstart), so
they query the same built index: run the spec once first (``kgrag run SPEC``); a
warm-up query per tree, not timed, builds whatever is missing. The questions are the
corpus's own (``--questions``, default the quickstart's MuSiQue file), whose
embeddings and answers the run left in the cache, so a query is timed without loading
the embedder or the LLM: what is left is imports, the spec, the models' identities, the
index and the retrieval.

Printed per tree, as medians over ``--repeats`` runs:

* ``validate_s``: wall seconds of ``kgrag validate SPEC``;
* ``query_s``: wall seconds of ``kgrag query SPEC QUESTION``, one question per process;
* ``validate_cpu_s``, ``query_cpu_s``: the CPU seconds (user + system, every thread)
  those processes used: about what they take alone on a quiet machine, where a busy one
  inflates the wall times;
* ``retrieved_s``: of those, the seconds until the first retrieved unit was printed;
* ``per_question_s``: in the interactive mode (``kgrag query SPEC`` reading
  ``--questions-per-session`` questions from standard input, all given at once), the
  seconds between one answer and the next, so the load is not in it; ``first_s`` is the
  seconds to the first answer, load included. A tree without that mode shows ``n/a``.

Timings beside other work are upper bounds: run it under the CPU lock, on a quiet machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
COLUMNS = ("tree", "validate_s", "validate_cpu_s", "query_s", "query_cpu_s", "retrieved_s",
           "per_question_s", "first_s")
CPU: list[float] = []  # CPU seconds (user + system) of each command timed, in order


def kgrag(*args: str) -> list[str]:
    """The command line of ``kgrag ARGS`` (run in a tree, whose ``kgrag`` it imports)."""
    return [sys.executable, "-m", "kgrag.cli", *args]


def timed(tree: Path, *args: str, stdin: str | None = None) -> list[tuple[float, str]]:
    """Run ``kgrag ARGS`` in ``tree``; each line of its output with the seconds from the
    start at which it arrived."""
    started = time.perf_counter()
    process = subprocess.Popen(kgrag(*args), cwd=tree, text=True, bufsize=1,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    process.stdin.write(stdin or "")
    process.stdin.close()
    lines = [(time.perf_counter() - started, line.rstrip("\n")) for line in process.stdout]
    _, status, usage = os.wait4(process.pid, 0)
    ended = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"kgrag {' '.join(args)} failed in {tree} (exit {process.returncode})")
    CPU.append(usage.ru_utime + usage.ru_stime)
    return lines + [(ended, "")]


def answers(lines: list[tuple[float, str]]) -> list[float]:
    return [t for t, line in lines if line.startswith("answer: ")]


def has_interactive_mode(tree: Path) -> bool:
    text = subprocess.run(kgrag("query", "--help"), check=True, cwd=tree, capture_output=True,
                          text=True).stdout
    return "standard input" in " ".join(text.split())


def measure(tree: Path, spec: Path, questions: list[str], repeats: int, per_session: int
            ) -> dict[str, str]:
    timed(tree, "query", str(spec), questions[0])  # warm-up: builds what is missing
    CPU.clear()
    validate = [timed(tree, "validate", str(spec))[-1][0] for _ in range(repeats)]
    validate_cpu = statistics.median(CPU)
    CPU.clear()
    one_shot, retrieved = [], []
    for question in questions[:repeats]:
        lines = timed(tree, "query", str(spec), question)
        one_shot.append(lines[-1][0])
        retrieved.append(next(t for t, line in lines if line.startswith("  ")))
    row = {"tree": str(tree), "validate_s": f"{statistics.median(validate):.2f}",
           "validate_cpu_s": f"{validate_cpu:.2f}",
           "query_s": f"{statistics.median(one_shot):.2f}",
           "query_cpu_s": f"{statistics.median(CPU):.2f}",
           "retrieved_s": f"{statistics.median(retrieved):.2f}",
           "per_question_s": "n/a", "first_s": "n/a"}
    if has_interactive_mode(tree):
        gaps, firsts = [], []
        for _ in range(repeats):
            stamps = answers(timed(tree, "query", str(spec),
                                   stdin="".join(f"{q}\n" for q in questions[:per_session])))
            assert len(stamps) == per_session, "not every question was answered"
            firsts.append(stamps[0])
            gaps += [b - a for a, b in itertools.pairwise(stamps)]
        row |= {"per_question_s": f"{statistics.median(gaps):.3f}",
                "first_s": f"{statistics.median(firsts):.2f}"}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path,
                        help="a kgrag checkout to time (repeat; default: this one)")
    parser.add_argument("--spec", type=Path, default=HERE / "specs" / "quickstart.yaml")
    parser.add_argument("--questions", type=Path, default=HERE / "corpora" / "musique_30.jsonl",
                        help="JSON lines with a 'question' field")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--questions-per-session", type=int, default=20)
    args = parser.parse_args()
    questions = [json.loads(line)["question"]
                 for line in args.questions.read_text().splitlines() if line.strip()]
    rows = [measure(tree.resolve(), args.spec.resolve(), questions, args.repeats,
                    args.questions_per_session) for tree in args.tree or [HERE]]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in COLUMNS}
    print("  ".join(c.ljust(widths[c]) for c in COLUMNS))
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in COLUMNS))


if __name__ == "__main__":
    main()
