"""What an LLM-free build and its queries cost as the corpus grows: one spec (nlp
entities, dense with the ``openvino-int8`` embedder and, past 100,000 chunks, the ANN
index of ``dense_index.ann``'s defaults, BM25, their fusion and ``ppr`` with its
default walk (``auto``: the push walk past 50,000 chunks) and with ``walk: power``) run
on each scale corpus of ``benchmarks/scale_corpus.py``, one table for all.

    flock /tmp/kgrag-heavy.lock python benchmarks/scale.py --sizes 1x 10k [--queries 100]

Per size, the build runs as ``kgrag run`` in a child process (so a size's memory is its
own; its peak is the child's VmHWM, read by ``wait4``), and the table gives, per step,
the wall seconds per 1,000 chunks, the step's peak RSS (the runner samples it) and its
artefact's bytes, from each artefact's ``build.json`` (so a step reused from an
interrupted earlier run still shows what building it cost). A second child opens one
``kgrag.api`` query session per strategy, against a call cache of its own so that every
question is embedded anew, and times ``--queries`` questions (the corpus's needle
questions, then other test-half questions of the shared samples): p50 and p95 per
strategy, question embedding included. R@5 is the evaluate step's recall@5 of the needle
questions; the sizes put the same needles among 1× (``1x``), 10× (``10k``) and 100×
(``100k``) as many distractor passages as their own paragraphs; each ``ppr`` strategy's
margin over the best baseline (dense, BM25 or fusion) is given with a paired 95 %
bootstrap interval over the needles.

Before each size it prints the build time that the largest size measured so far
predicts, carried linearly. A size whose run is stopped resumes through the artefacts
and the call cache when run again, and its whole run's seconds add every attempt's
(``build``), each with the machine's mean load while it ran. The machine is shared with
other work unless said otherwise: timings are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scale_corpus import SAMPLES, SIZES, write

STRATEGIES = ("dense", "bm25", "fusion", "ppr", "ppr-power")
HEARTBEAT = 30  # seconds between a build's notes of its attempt
SPEC = """\
# written by benchmarks/scale.py: the LLM-free scale spec over {label}
name: scale-{size}
corpus: {{dataset: jsonl, path: documents.jsonl, questions_file: questions.jsonl}}
chunking: {{size: 256, overlap: 32}}
models:
  embedder: {{model: all-MiniLM-L6-v2, backend: openvino-int8}}
dense_index: {{ann: {{}}}}
extraction: {{method: nlp}}
graphs:
  - {{name: nlp-kg, kind: entities}}
query:
  - {{name: dense, strategy: naive, budget_tokens: 2000}}
  - {{name: bm25, strategy: bm25, budget_tokens: 2000}}
  - {{name: fusion, strategy: fusion, fuse: [dense, bm25], budget_tokens: 2000}}
  - {{name: ppr, strategy: ppr, entities: nlp-kg, budget_tokens: 2000}}
  - {{name: ppr-power, strategy: ppr, entities: nlp-kg, walk: power, budget_tokens: 2000}}
answer: {{questions: 0}}
evaluate: {{metrics: [recall@5]}}
{cache}"""


def spec_for(size: str, seed: int, data: Path, cache: str = "", added: int = 0) -> Path:
    """The size's corpus folder (written if missing) with its spec; ``cache`` an extra
    spec section (a query session's own call cache); ``added`` distractors more than the
    size holds (``grow``), in a folder of their own and the size's run folder, as a user
    adds files to a documents folder and runs the spec again."""
    label = f"{size}-plus{added}" if added else size
    folder = ROOT / "outputs" / "scale-corpus" / label
    if not (folder / "corpus.json").exists():
        print(f"writing the {label} corpus ...", flush=True)
        write(folder, size, seed, data, added)
    name = "query-spec.yaml" if cache else "spec.yaml"
    (folder / name).write_text(SPEC.format(size=size, label=label, cache=cache))
    return folder / name


def build(spec: Path) -> dict:
    """Run the spec in a child process; its wall seconds and peak RSS (VmHWM).

    A build of hours outlives a session: each attempt is written to ``attempts.json``
    beside the spec every ``HEARTBEAT`` seconds (its seconds so far and the machine's
    load), so a killed attempt's time is kept, and the finished build's ``wall_s`` is
    the sum over every attempt since the last finished one (a killed attempt loses the
    batch in flight and at most a heartbeat of its count). Peak RSS is the last
    attempt's, the only one ``wait4`` reports."""
    ledger = spec.parent / "attempts.json"
    attempts = json.loads(ledger.read_text()) if ledger.exists() else []
    attempts = [] if attempts and attempts[-1]["finished"] else attempts
    attempt = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "wall_s": 0.0, "load": [],
               "finished": False}
    attempts.append(attempt)
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "kgrag.cli", "run", str(spec)], cwd=ROOT)
    ended: dict = {}

    def reap() -> None:
        _, status, usage = os.wait4(child.pid, 0)
        ended.update(code=os.waitstatus_to_exitcode(status), usage=usage,
                     at=time.perf_counter())

    reaper = threading.Thread(target=reap, daemon=True)
    reaper.start()
    while reaper.is_alive():
        reaper.join(HEARTBEAT)
        attempt["wall_s"] = ended.get("at", time.perf_counter()) - started
        attempt["finished"] = ended.get("code") == 0
        if not ended:
            attempt["load"].append(os.getloadavg()[0])
        ledger.write_text(json.dumps(attempts, indent=1) + "\n")
    if ended["code"] != 0:
        raise SystemExit(f"kgrag run {spec} failed (exit {ended['code']})")
    return {"wall_s": sum(a["wall_s"] for a in attempts),
            "peak_rss_mb": ended["usage"].ru_maxrss / 1024,
            "attempts": [{"wall_s": round(a["wall_s"], 1), "load_mean": round(
                statistics.fmean(a["load"]), 2) if a["load"] else None} for a in attempts]}


def steps(run_dir: Path) -> list[dict]:
    """Per artefact of the run: its step, what building it cost and its bytes."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    out = []
    for step in manifest["steps"]:
        artefact = run_dir / step["artefact"]
        record = json.loads((artefact / "build.json").read_text())
        notes = record.get("notes", {})
        # the chunks a step computed, where some came from the call cache (a size that
        # shares passages with a smaller one built before it): its cost is theirs
        hits = (notes.get("parse_cache_hits", 0) + record.get("embed", {}).get("cache_hits", 0)
                if step["kind"] in ("extract", "dense_index") else 0)
        out.append({"step": step["name"], "wall_s": record["wall_s"], "cache_hits": hits,
                    "peak_rss_mb": record["peak_rss_mb"], "notes": notes,
                    "bytes": sum(f.stat().st_size for f in artefact.rglob("*") if f.is_file())})
    return out


def recall(run_dir: Path) -> dict[str, float]:
    rows = json.loads((run_dir / "metrics.json").read_text())["rows"]
    return {row["strategy"]: row.get("recall@5") for row in rows}


def per_question(spec: Path) -> dict[str, list[float]]:
    """Each strategy's recall@5 per needle question, in one question order, as the
    evaluate step counts it: what the paired intervals of ``margins`` resample."""
    from kgrag.api import open_session
    from kgrag.contents.corpus import read_questions
    from kgrag.contents.retrieved import read_retrieved
    from kgrag.eval.metrics import recall_at_k

    session = open_session(spec)
    questions = read_questions(session.artefact("corpus"))
    supporting = dict(zip(questions["question_id"].to_list(),
                          questions["supporting_doc_ids"].to_list()))
    out = {}
    for strategy in STRATEGIES:
        retrieved = read_retrieved(session.artefact(f"retrieve.{strategy}")).sort("question_id")
        out[strategy] = [recall_at_k(docs, supporting[q], 5) for q, docs in zip(
            retrieved["question_id"].to_list(), retrieved["doc_ids"].to_list())
            if supporting[q]]
    return out


def margins(result: dict, rounds: int = 10_000) -> list[str]:
    """Each ppr strategy's R@5 less the best baseline's (dense, BM25 or fusion, by mean)
    at this size: the mean over the needles and its paired 95 % bootstrap interval. The
    ppr rows are the result's own (one kept from an earlier run has its spec's then)."""
    import numpy as np

    from benchmarks.bootstrap import interval

    per = {s: np.array(v, dtype=float) for s, v in result["recall@5_per_question"].items()}
    best = max(("dense", "bm25", "fusion"), key=lambda s: per[s].mean())
    rng = np.random.default_rng(0)
    return [f"{result['size']}: {ppr} − {best} R@5 "
            f"{interval(per[ppr] - per[best], rounds, rng)} over {len(per[best])} needles"
            for ppr in per if ppr.startswith("ppr")]


def timing_questions(folder: Path, n: int, seed: int, data: Path) -> list[str]:
    """``n`` questions: the corpus's needles, then the other test-half questions."""
    from kgrag.corpus.importers import load_corpus
    from kgrag.eval.halves import halves

    asked = [json.loads(line)["question"] for line in (folder / "questions.jsonl").open()]
    for sample, name in SAMPLES.items():
        questions = load_corpus({"dataset": sample, "path": name, "limit": None,
                                 "questions": None}, data).questions
        test = halves(questions["question_id"], seed)["test"]
        asked += [q for i, q in questions.select("question_id", "question").iter_rows()
                  if i in test and q not in asked]
    return asked[:n]


def fresh_cache(size: str, seed: int, data: Path) -> Path:
    """The size's spec with a call cache of its own, empty: every question it embeds is
    embedded anew (a spec per strategy, or the strategies after the first would find
    the first's question vectors). The build's exported embedder is linked in, so that
    it is not exported (and calibrated) again."""
    from kgrag.configuration import default_cache_dir

    cache = ROOT / "outputs" / "scale-query-cache" / f"{size}-{time.time_ns()}"
    cache.mkdir(parents=True)
    (cache / "exported-embedders").symlink_to(default_cache_dir() / "exported-embedders")
    return spec_for(size, seed, data, cache=f"cache: {{dir: {cache}}}\n")


def query_session(size: str, seed: int, data: Path,
                  questions: list[str]) -> dict[str, dict[str, float]]:
    """p50/p95 milliseconds of ``Querier.retrieve`` per strategy, embedding included."""
    from kgrag.api import open_query

    out = {}
    for strategy in STRATEGIES:
        querier = open_query(fresh_cache(size, seed, data), strategy, echo=lambda _line: None)
        querier.retrieve(questions[0])  # the embedder and the index loaded, not timed
        times = []
        for question in questions[1:]:
            started = time.perf_counter()
            querier.retrieve(question)
            times.append((time.perf_counter() - started) * 1000)
        cuts = statistics.quantiles(times, n=20)
        out[strategy] = {"p50": statistics.median(times), "p95": cuts[18]}
    return out


def tile(size: str, copies: int, seed: int, data: Path) -> dict[str, Path]:
    """The ``size`` run's chunks, dense vectors and extraction repeated ``copies`` times,
    each copy's chunk, document and entity names suffixed ``~<copy>`` (copy 0 as built),
    so that the graph grows with the copies rather than merging them; by step name."""
    import numpy as np
    import polars as pl

    from kgrag.api import open_session
    from kgrag.contents.chunks import read_chunks, write_chunks
    from kgrag.contents.dense import DENSE_TABLE, dense_matrix, write_matrix
    from kgrag.contents.entities import read_entities, read_relationships, write_entity_tables
    from kgrag.contents.extraction import read_counts, write_counts
    from kgrag.store.vectors import VectorTable

    session = open_session(spec_for(size, seed, data))
    out = ROOT / "outputs" / "scale-tiled" / f"{size}x{copies}"
    folders = {name: out / name for name in ("chunks", "dense", "extract.nlp-kg")}
    if (out / "done-2").exists():  # "done": tiled before the dense artefact's matrix file
        return folders
    suffixes = [""] + [f"~{c}" for c in range(1, copies)]

    def renamed(frame: pl.DataFrame, names: list[str], lists: list[str]) -> pl.DataFrame:
        return pl.concat([frame.with_columns(*(pl.col(n) + s for n in names),
                                             *(pl.col(n).list.eval(pl.element() + s)
                                               for n in lists)) for s in suffixes])

    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    write_chunks(folders["chunks"], [renamed(read_chunks(session.artefact("chunks")),
                                             ["chunk_id", "doc_id"], [])])
    ids, matrix = dense_matrix(session.artefact("dense"))
    write_matrix(folders["dense"], VectorTable.create(
        folders["dense"], DENSE_TABLE, [i + s for s in suffixes for i in ids],
        np.tile(matrix, (copies, 1))))
    extract = session.artefact("extract.nlp-kg")
    write_counts(folders["extract.nlp-kg"], renamed(read_counts(extract), ["chunk_id"], []))
    write_entity_tables(folders["extract.nlp-kg"],
                        renamed(read_entities(extract), ["name"], ["source_chunk_ids"]),
                        renamed(read_relationships(extract), ["source", "target"],
                                ["source_chunk_ids"]))
    (out / "done-2").write_text("")
    return folders


def simulated_queries(size: str, copies: int, questions: list[str], seed: int,
                      data: Path) -> dict[str, dict[str, float]]:
    """``query_session`` on the tiled artefacts: each strategy loaded from them as a
    query session loads it, each question embedded anew and retrieved."""
    from kgrag.api import open_session
    from kgrag.steps.retrieve import load_strategy

    tiled = tile(size, copies, seed, data)
    out = {}
    for strategy in STRATEGIES:
        session = open_session(fresh_cache(size, seed, data))
        step = session.plan.queries[strategy]
        started = time.perf_counter()
        loaded = load_strategy(step.config, {role: tiled[dep] for role, dep in step.inputs.items()
                                             if dep in tiled}, session.models)
        load_s = time.perf_counter() - started
        embedder = session.models.embedder_of(step.config["embedder"])
        loaded.retrieve(questions[0], embedder.encode([questions[0]])[0])
        times = []
        for question in questions[1:]:
            started = time.perf_counter()
            loaded.retrieve(question, embedder.encode([question])[0])
            times.append((time.perf_counter() - started) * 1000)
        out[strategy] = {"p50": statistics.median(times),
                         "p95": statistics.quantiles(times, n=20)[18], "load_s": load_s}
    return out


def measure(size: str, args: argparse.Namespace) -> dict:
    data = Path(args.data)
    spec = spec_for(size, args.seed, data)
    corpus = json.loads((spec.parent / "corpus.json").read_text())
    whole = build(spec)
    run_dir = ROOT / "outputs" / f"scale-{size}"
    questions = timing_questions(spec.parent, args.queries + 1, args.seed, data)
    probe = subprocess.run([sys.executable, __file__, "--query-session", size,
                            "--seed", str(args.seed), "--data", args.data],
                           input=json.dumps(questions), capture_output=True, text=True,
                           cwd=ROOT, check=True)
    return {"size": size, "corpus": corpus, "build": whole, "steps": steps(run_dir),
            "recall@5": recall(run_dir), "recall@5_per_question": per_question(spec),
            "query_ms": json.loads(probe.stdout.splitlines()[-1])}


def grow(size: str, share: float, args: argparse.Namespace, cold: dict) -> dict:
    """Add ``share`` of the size's documents to it (new distractor passages) and run the
    spec again in the same run folder with the same call cache, as a user reruns after
    adding files: each step starts from its artefact of the size's build where it can
    (``StepContext.earlier``). ``cold`` is the size's build in this run, which must have
    computed everything for the ratio to mean anything."""
    added = round(share * SIZES[size])
    spec = spec_for(size, args.seed, Path(args.data), added=added)
    written = json.loads((spec.parent / "corpus.json").read_text())
    if written.get("distractors_short"):  # the installed text ran out: nothing new to add
        raise SystemExit(f"--grow: the {size} folder already holds every distinct passage "
                         f"installed here ({written['distinct_passages_available']:,}), so "
                         "none is left to add; install more text (docs/scale.md)")
    whole = build(spec)
    if any(s["cache_hits"] for s in cold["steps"]):
        print(f"warning: the {size} build found chunks in the call cache: it was not cold, "
              "so the ratios below are not against a cold build", flush=True)
    return {"added": added, "build": whole, "steps": steps(ROOT / "outputs" / f"scale-{size}")}


def grown_table(result: dict) -> str:
    """The rerun after adding documents against the size's cold build, step by step."""
    grown = result["grown"]
    lines = [(f"Adding {grown['added']:,} documents to {result['size']} "
              f"({chunks_of(result):,} chunks):"), "",
             "| step | cold build s | rerun after adding s | share |", "|---|---|---|---|"]
    rerun = {s["step"]: s["wall_s"] for s in grown["steps"]}
    for s in result["steps"]:
        lines.append(f"| {s['step']} | {s['wall_s']:.1f} | {rerun[s['step']]:.1f} | "
                     f"{rerun[s['step']] / s['wall_s']:.1%} |")
    cold, again = result["build"]["wall_s"], grown["build"]["wall_s"]
    lines.append(f"| **whole run** (child process) | {cold:.1f} | {again:.1f} | "
                 f"{again / cold:.1%} |")
    return "\n".join(lines)


def chunks_of(result: dict) -> int:
    return next(s["notes"]["chunks"] for s in result["steps"] if s["step"] == "chunks")


def table(results: list[dict]) -> str:
    lines = [("| size | chunks | distractors | step | s / 1,000 chunks computed | peak RSS MB | "
              "artefact MB | bytes / chunk |"), "|---|---|---|---|---|---|---|---|"]
    for r in results:
        n = chunks_of(r)
        where = f"| {r['size']} | {n:,} | {r['corpus']['ratio']}× |"
        for s in r["steps"]:
            computed = n - s["cache_hits"] if 0 < s["cache_hits"] < n else n
            lines.append(f"{where} {s['step']} | {1000 * s['wall_s'] / computed:.2f} | "
                         f"{s['peak_rss_mb']:.0f} | {s['bytes'] / 2**20:.1f} | "
                         f"{s['bytes'] / n:,.0f} |")
        lines.append(f"{where} **whole run** (child VmHWM) | "
                     f"{1000 * r['build']['wall_s'] / n:.2f} | {r['build']['peak_rss_mb']:.0f} |"
                     f" {sum(s['bytes'] for s in r['steps']) / 2**20:.1f} | "
                     f"{sum(s['bytes'] for s in r['steps']) / n:,.0f} |")
    lines += ["", "| size | strategy | query p50 ms | query p95 ms | R@5 needles |",
              "|---|---|---|---|---|"]
    for r in results:
        for strategy in r["query_ms"]:  # a kept result's rows are its spec's
            q = r["query_ms"][strategy]
            r5 = r["recall@5"].get(strategy)
            lines.append(f"| {r['size']} | {strategy} | {q['p50']:.1f} | {q['p95']:.1f} | "
                         f"{'-' if r5 is None else f'{r5:.3f}'} |")
    margin = [line for r in results if "recall@5_per_question" in r for line in margins(r)]
    lines += ["", "ppr against the best baseline (paired):", *margin] if margin else []
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", nargs="+", default=["1x", "10k"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--budget-min", type=float, default=25,
                        help="skip a size whose estimated build takes longer (minutes)")
    parser.add_argument("--tile", type=int, default=0, metavar="COPIES",
                        help="no build: time the queries on the first size built, its "
                             "artefacts repeated COPIES times (a simulation of a larger size)")
    parser.add_argument("--grow", type=float, default=0, metavar="SHARE",
                        help="after each size, add SHARE of its documents and rerun with the "
                             "same cache: the incremental rebuild's cost against the cold one")
    parser.add_argument("--query-session", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.query_session:
        print(json.dumps(query_session(args.query_session, args.seed, Path(args.data),
                                       json.loads(sys.stdin.read()))))
        return
    if args.tile:
        size, data = args.sizes[0], Path(args.data)
        started = time.perf_counter()
        questions = timing_questions(ROOT / "outputs" / "scale-corpus" / size,
                                     args.queries + 1, args.seed, data)
        result = simulated_queries(size, args.tile, questions, args.seed, data)
        print(f"SIMULATION: the {size} run's artefacts tiled {args.tile} times "
              f"({time.perf_counter() - started:.0f} s, peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
        print("| strategy | query p50 ms | query p95 ms | load s |\n|---|---|---|---|")
        for strategy, q in result.items():
            print(f"| {strategy} | {q['p50']:.1f} | {q['p95']:.1f} | {q['load_s']:.1f} |")
        return
    # cumulative over runs, by size: a size measured before gives the next its estimate
    out = ROOT / "outputs" / "scale-results.json"
    kept = {r["size"]: r for r in (json.loads(out.read_text()) if out.exists() else [])}
    for size in args.sizes:
        built = [r for r in kept.values() if r["size"] != size]
        if built:
            last = max(built, key=chunks_of)
            per = last["build"]["wall_s"] / chunks_of(last)
            estimate = per * SIZES[size] / 60
            print(f"estimate for {size}: {estimate:.0f} min of build, carried linearly from "
                  f"{last['size']}", flush=True)
            if estimate > args.budget_min:
                print(f"skipped {size}: over --budget-min {args.budget_min:g}", flush=True)
                continue
        kept[size] = measure(size, args)
        if args.grow:
            kept[size]["grown"] = grow(size, args.grow, args, kept[size])
        results = sorted(kept.values(), key=chunks_of)
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(table(results), flush=True)
        print(f"{size}'s whole run over its attempts (seconds, mean load): " + ", ".join(
            f"{a['wall_s']:.0f} s ({a['load_mean']})" for a in kept[size]["build"]["attempts"]))
        if args.grow:
            print(grown_table(kept[size]), flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])
