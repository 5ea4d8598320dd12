"""What the retrieve side of a built run holds: each query strategy of a spec loaded in
one process, in spec order, as the retrieve steps of ``kgrag run`` load them
(``kgrag.steps.retrieve.load_strategy``), then asked the run's questions.

    KGRAG_CACHE_DIR=<the run's call cache> flock /tmp/kgrag-heavy.lock \\
        python benchmarks/retrieve_memory.py SPEC OUT [--questions N] [--trace 12]

The spec's build steps must be built already (this loads, it builds nothing), and the call
cache must hold the questions' vectors (a run that retrieved them stored them). Per
strategy it prints the process's RSS (``VmRSS``) before the load, after it and after the
questions, its peak while loading and retrieving (sampled, ``kgrag.host.PeakRSS``), what
the load holds (RSS after over before) in MB and in bytes per chunk, and what stays once
the strategy is dropped (the module caches: ppr's loaded search and graph); then the
process's ``VmHWM``. ``--trace K`` also lists, per load, the K source lines that hold
most of what it allocated (``tracemalloc``: slower, and its own bookkeeping inflates
RSS, so RSS figures of a traced run are not the untraced ones). Each strategy's
retrieved rows (ids, documents, tokens, context, trace, without the timings) go to
``OUT/<step name>.parquet``: two checkouts' files compare with ``--compare``.

    python benchmarks/retrieve_memory.py --compare OUT_BEFORE OUT_AFTER
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def status_mb(field: str) -> float:
    """A field of ``/proc/self/status`` in kB (``VmRSS``, ``VmHWM``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def holders(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, k: int) -> list[str]:
    """The ``k`` source lines whose allocations grew most from ``before`` to ``after``."""
    top = after.compare_to(before, "lineno")[:k]
    return [f"    {stat.size_diff / 2**20:8.1f} MB  {stat.traceback[0].filename.replace(str(ROOT) + '/', '')}"
            f":{stat.traceback[0].lineno}" for stat in top]


def retrieved_rows(strategy: Any, questions: list[tuple[str, str, Any]]) -> list[dict]:
    """What the retrieve step writes of each question, less its timings."""
    rows = []
    for qid, text, vector in questions:
        context = strategy.retrieve(text, vector)
        rows.append({"question_id": qid, "unit_ids": context.unit_ids,
                     "doc_ids": context.doc_ids, "context": context.text,
                     "context_tokens": context.tokens,
                     "trace": json.dumps(context.trace, sort_keys=True)})
    return rows


def measure(spec: Path, out: Path, n_questions: int | None, trace: int) -> None:
    """Load and ask every query strategy of ``spec`` in turn; print the table."""
    import polars as pl

    from kgrag.contents.chunks import read_chunks
    from kgrag.contents.corpus import read_questions
    from kgrag.host import PeakRSS
    from kgrag.session import open_session
    from kgrag.steps.retrieve import load_strategy

    session = open_session(spec)
    steps = [step for step in session.plan.steps if step.kind == "retrieve"]
    inputs = {step.name: {role: session.artefact(dep) for role, dep in step.inputs.items()}
              for step in steps}
    first = inputs[steps[0].name]
    chunks = read_chunks(first["chunks"], ["chunk_id"]).height
    questions = read_questions(first["corpus"])
    questions = questions if n_questions is None else questions.head(n_questions)
    texts = questions["question"].to_list()
    vectors = session.models.embedder_of(steps[0].config["embedder"]).encode(texts)
    asked = list(zip(questions["question_id"].to_list(), texts, vectors))
    out.mkdir(parents=True, exist_ok=True)
    gc.collect()
    base = status_mb("VmRSS")
    print(f"{chunks:,} chunks, {len(asked)} questions; RSS before the first load "
          f"{base:,.0f} MB")
    print("| strategy | RSS before | load peak | after load | load holds MB | B / chunk "
          "| retrieve peak | after questions | after drop |")
    print("|---|---|---|---|---|---|---|---|---|")
    lines = []
    for step in steps:
        before = status_mb("VmRSS")
        if trace:
            tracemalloc.start()
            start = tracemalloc.take_snapshot()
        with PeakRSS() as loading:
            strategy = load_strategy(step.config, inputs[step.name], session.models)
        loaded = status_mb("VmRSS")
        if trace:
            lines += [f"{step.name}: the load's top holders (tracemalloc)",
                      *holders(start, tracemalloc.take_snapshot(), trace)]
            tracemalloc.stop()
        with PeakRSS() as retrieving:
            rows = retrieved_rows(strategy, asked)
        answered = status_mb("VmRSS")
        pl.DataFrame(rows).write_parquet(out / f"{step.name}.parquet")
        del strategy, rows
        gc.collect()
        held = loaded - before
        print(f"| {step.name} | {before:,.0f} | {loading.peak / 2**20:,.0f} | {loaded:,.0f} "
              f"| {held:,.0f} | {held * 2**20 / chunks:,.0f} | {retrieving.peak / 2**20:,.0f} "
              f"| {answered:,.0f} | {status_mb('VmRSS'):,.0f} |", flush=True)
    hwm = status_mb("VmHWM")
    print(f"VmHWM {hwm:,.0f} MB: {hwm - base:,.0f} MB over the base, "
          f"{(hwm - base) * 2**20 / chunks:,.0f} B a chunk")
    print("\n".join(lines))


def compare(before: Path, after: Path) -> int:
    """Each strategy's rows in ``before`` and ``after`` equal or not; 1 if any differ."""
    import polars as pl

    differ = 0
    for path in sorted(before.glob("*.parquet")):
        same = pl.read_parquet(path).equals(pl.read_parquet(after / path.name))
        differ += not same
        print(f"{path.stem}: {'identical' if same else 'DIFFERENT'}")
    return int(differ > 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="a built spec, or OUT_BEFORE with --compare")
    parser.add_argument("out", type=Path, help="a folder for the retrieved rows")
    parser.add_argument("--questions", type=int, default=None, help="the first N (all)")
    parser.add_argument("--trace", type=int, default=0, metavar="K",
                        help="list each load's K biggest holders (tracemalloc)")
    parser.add_argument("--compare", action="store_true",
                        help="compare two OUT folders' rows instead")
    args = parser.parse_args()
    if args.compare:
        return compare(args.spec, args.out)
    measure(args.spec, args.out, args.questions, args.trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
