"""LLM throughput when kgrag shares the CPU, and calls paid when two runs share a cache.

    python benchmarks/llm_contention.py                       # this checkout ("after")
    python benchmarks/llm_contention.py --code ../kgrag-old   # another checkout ("before")
    python benchmarks/llm_contention.py --prefix              # prefix reuse vs whole prompts

Every figure comes from real SmolLM2 135M calls in worker processes started by this
script, with the code of ``--code`` on their path (default: this checkout), so the same
script measures a checkout before and after a change. Workloads: short-answer prompts
over MuSiQue paragraphs (distinct per worker, so each call really runs the model),
48 output tokens each, for ``--seconds`` of wall time; rates are calls per minute.

Scenarios
  alone      one worker
  together   two workers at once, each on its own prompts and cache
  beside     one worker while the unit-test suite runs (pytest -m "not integration"), and
             one while the integration tests run (real llama.cpp and MiniLM in the suite)
  shared     two workers at once on the same --shared prompts and one cache: the calls
             the model paid in all (one run alone pays --shared)

``--prefix`` instead times extraction calls (chat, JSON-schema constrained, the few-shot
prompt every chunk shares) with the shared prefix reused at block boundaries against
every prompt evaluated whole, and checks that both give the same outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "data" / "musique_200.jsonl"


def prompts(offset: int, count: int) -> list[str]:
    from kgrag.answer import completion_prompt

    out = []
    for line in SAMPLE.read_text().splitlines()[offset:offset + count]:
        q = json.loads(line)
        context = "\n\n".join(f"# {p['title']}\n{p['paragraph_text']}"
                              for p in q["paragraphs"][:3])
        out.append(completion_prompt(context, q["question"]))
    return out


def smollm2(cache_dir: Path):
    from kgrag.models.backend import LLMSettings
    from kgrag.models.cache import CallCache
    from kgrag.models.llm import CachedLLM
    from kgrag.models.registry import resolve_llm

    model = resolve_llm("smollm2-135m", REPO)
    settings = LLMSettings(name=model.name, path=model.path, sha256=model.sha256)
    return CachedLLM(settings, CallCache(cache_dir))


def worker(args: argparse.Namespace) -> None:
    """One process answering prompts until its time or its prompts run out."""
    llm = smollm2(Path(args.cache))
    llm.backend._model()  # load before the clock starts
    todo = prompts(args.offset, args.count)
    started = time.perf_counter()
    done = 0
    for prompt in todo:
        if time.perf_counter() - started > args.seconds:
            break
        llm.complete(prompt, max_tokens=48)
        done += 1
    wall = time.perf_counter() - started
    print(json.dumps({"done": done, "wall_s": wall, "model_calls": llm.usage.calls,
                      "cache_hits": llm.usage.cache_hits}))


def spawn(code: Path, cache: Path, offset: int, count: int, seconds: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(code)}
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", "--cache", str(cache), "--offset", str(offset),
         "--count", str(count), "--seconds", str(seconds)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=code)


def collect(workers: list[subprocess.Popen]) -> list[dict]:
    return [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]


def per_minute(result: dict) -> float:
    return 60 * result["done"] / result["wall_s"]


def besides(code: Path, cache: Path, marker: str, seconds: float) -> dict:
    """One worker while the ``marker`` tests of the same checkout run beside it."""
    suite = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-m", marker,
                              "-p", "no:cacheprovider"], cwd=code,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(10)  # past the suite's start-up, into its tests
    result = collect([spawn(code, cache, 0, 1000, seconds)])[0]
    suite.kill()
    suite.wait()
    return result


def scenarios(args: argparse.Namespace) -> None:
    code = Path(args.code).resolve()
    seconds, many = args.seconds, 1000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        alone = collect([spawn(code, root / "a", 0, many, seconds)])[0]
        together = collect([spawn(code, root / "t1", 0, many, seconds),
                            spawn(code, root / "t2", 100, many, seconds)])
        beside = {suite: besides(code, root / suite, suite, seconds)
                  for suite in ("not integration", "integration")}
        shared = collect([spawn(code, root / "s", 0, args.shared, 10 * seconds)
                          for _ in range(2)])
    print(f"code: {code}")
    print(f"{'scenario':<34} {'calls/min':>10}  vs alone")
    print(f"{'alone':<34} {per_minute(alone):>10.1f}  1.00")
    for i, r in enumerate(together, 1):
        print(f"{f'together, worker {i}':<34} {per_minute(r):>10.1f}  "
              f"{per_minute(r) / per_minute(alone):.2f}")
    for suite, label in (("not integration", "unit tests"), ("integration", "integration tests")):
        r = beside[suite]
        print(f"{'beside the ' + label:<34} {per_minute(r):>10.1f}  "
              f"{per_minute(r) / per_minute(alone):.2f}")
    paid = sum(r["model_calls"] for r in shared)
    print(f"two workers, the same {args.shared} prompts, one cache: model calls paid {paid}, "
          f"cache hits {sum(r['cache_hits'] for r in shared)}, wall "
          f"{max(r['wall_s'] for r in shared):.1f} s")


def prefix_reuse(args: argparse.Namespace) -> None:
    """Extraction calls with the shared prefix reused at block boundaries vs whole."""
    from kgrag.graphs.extraction.llm import extract
    from kgrag.models.llamacpp import LlamaCppBackend

    class WholeBackend(LlamaCppBackend):
        def generate(self, request: dict):
            self._model().reset()  # no reuse: every prompt evaluated from its first token
            return super().generate(request)

    chunks = []
    for line in SAMPLE.read_text().splitlines():
        chunks += [p["paragraph_text"] for p in json.loads(line)["paragraphs"]
                   if p["is_supporting"]]
        if len(chunks) >= args.chunks:
            break
    results: dict[str, list[float]] = {"aligned": [], "whole": []}
    outputs: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):  # alternate, so drift hits both alike
            for mode in ("aligned", "whole"):
                llm = smollm2(Path(tmp) / f"{mode}{round_}")
                if mode == "whole":
                    llm.backend = WholeBackend(llm.settings)
                llm.backend._model()
                started = time.perf_counter()
                out = [extract(llm, f"c{i}", text, style="chat")
                       for i, text in enumerate(chunks[:args.chunks])]
                results[mode].append((time.perf_counter() - started) / len(out))
                outputs.setdefault(mode, [(x.entities, x.relationships) for x in out])
    aligned, whole = (statistics.median(results[m]) for m in ("aligned", "whole"))
    print(f"{args.chunks} extraction calls x {args.rounds} rounds, SmolLM2 chat")
    for label, mode, median in (("prefix reused at block boundaries", "aligned", aligned),
                                ("every prompt evaluated whole:    ", "whole", whole)):
        rounds = ", ".join(f"{x:.2f}" for x in results[mode])
        print(f"  s/call, {label} {median:.2f} (rounds {rounds})")
    print(f"  speed-up {whole / aligned:.2f}x; identical outputs: "
          f"{outputs['aligned'] == outputs['whole']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", default=str(REPO), help="checkout the workers import")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--shared", type=int, default=12)
    parser.add_argument("--prefix", action="store_true")
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
    elif args.prefix:
        prefix_reuse(args)
    else:
        scenarios(args)


if __name__ == "__main__":
    main()
