"""A model server against the in-process model: hybrid extraction throughput at 1, 2 and 4
requests in flight, the server path's overhead, and the quickstart through a server.

    PYTHONPATH=. flock /tmp/kgrag-cpu.lock python benchmarks/server_throughput.py
    python benchmarks/server_throughput.py --chunks 10 --skip-quickstart

Extraction: the first ``--chunks`` (default 40) chunks of musique_200 as a spec cuts them
(the ``llm_extraction_speed`` benchmark's chunks), parsed once by spaCy outside the timed
part; then the hybrid relation call (``prompt: chat``, SmolLM2 135M) for every chunk,
each variant through its own fresh call cache, so every call really runs. Each variant
first extracts the two chunks after those (untimed), so that its shared prompt prefix is
evaluated and its first-call costs are paid before the clock starts:

  in-process          ``LlamaCppBackend`` as a build runs it (greedy-first grammar check)
  in-process-fullmask the same with llama-cpp-python's own grammar check, which is what
                      llama-cpp-python's server runs: the same decoding work as the
                      server rows, so their difference is the server path's overhead
  server-cN           llama-cpp-python's OpenAI-compatible server (its ``server`` extra,
                      started here on 127.0.0.1 with as many threads as the in-process
                      model), ``ServerBackend`` with N work items in flight (the
                      ``ThreadedExecutor`` a spec's ``concurrency: N`` selects)

Figures: wall seconds, chunks per minute, the rate over in-process, and the share of
chunks whose triples equal the in-process-fullmask run's. The server starts (and loads
the model) before its rows are timed, as the in-process model loads before its own.

Quickstart (``specs/quickstart.yaml``, Gemma 3 270M, 30 questions, two strategies):
run in-process on the usual call cache (``KGRAG_CACHE_DIR``: a quickstart run before
answers from it), then through the server (``models.llm.server`` with the GGUF's sha256
as its identity) on a fresh cache, then the served spec again: the metrics of each, the
model calls of each run and whether the warm rerun made any request.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the extraction benchmark's chunks
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests' local server

from llm_extraction_speed import musique_chunks

from kgrag import api
from kgrag.eval.report import format_table
from kgrag.graphs.extraction.hybrid import relate
from kgrag.graphs.extraction.nlp import NlpExtractor
from kgrag.host import usable_cores
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.executor import ThreadedExecutor
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.llm import CachedLLM
from kgrag.models.pipelines import load_pipeline, resolve_pipeline
from kgrag.models.registry import resolve_llm
from kgrag.models.served import ServerBackend, resolve_llm_entry
from tests.local_server import LocalServer

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "specs" / "quickstart.yaml"
WARM_UP = 2  # chunks after the measured ones, run by each variant before its timing
COLUMNS = ("variant", "chunks", "wall_s", "chunks_per_min", "vs_in_process", "same_triples")


def served_llm(server: LocalServer, model: Any, cache: CallCache, concurrency: int) -> CachedLLM:
    served = resolve_llm_entry({"server": server.url, "model": str(model.path),
                                "identity": f"sha256:{model.sha256}",
                                "concurrency": concurrency}, None, "models.llm")
    settings = LLMSettings(name=served.name, path=served.path, sha256=served.sha256)
    return CachedLLM(settings, cache, ServerBackend(served))


def extraction_rows(count: int, folder: Path) -> list[dict[str, Any]]:
    model = resolve_llm("smollm2-135m")
    chunks = musique_chunks(count + WARM_UP)
    pipeline = resolve_pipeline("en_core_web_sm")
    nlp = load_pipeline(pipeline)
    parsed = NlpExtractor(pipeline, CallCache(folder / "nlp"), load=lambda _: nlp).extract(chunks)
    work, warm_up = list(zip(chunks, parsed))[:count], list(zip(chunks, parsed))[count:]
    threads = usable_cores()

    def one(llm: CachedLLM, item: tuple[Any, Any]) -> list[tuple[str, str, str]]:
        chunk, extraction = item
        related = relate(llm, extraction, chunk.unit, style="chat").extraction
        return sorted((r.source, r.description, r.target) for r in related.relationships)

    def timed(name: str, llm: CachedLLM, run: Callable[[], list[Any]]) -> dict[str, Any]:
        for item in warm_up:  # the shared prompt prefix evaluated once, outside the timing
            one(llm, item)
        started = time.perf_counter()
        triples = run()
        wall = time.perf_counter() - started
        print(f"{name}: {wall:.1f} s, {llm.usage.calls} calls with the warm-up", file=sys.stderr,
              flush=True)
        return {"variant": name, "chunks": len(work), "wall_s": round(wall, 1),
                "chunks_per_min": round(60 * len(work) / wall, 2), "triples": triples}

    rows = []
    for name, greedy_first in (("in-process", True), ("in-process-fullmask", False)):
        backend = LlamaCppBackend(LLMSettings(name=model.name, path=model.path,
                                              sha256=model.sha256, n_ctx=4096,
                                              n_threads=threads), greedy_first=greedy_first)
        backend.generate({"prompt": "Hello", "max_tokens": 1, "temperature": 0.0,
                          "top_p": 1.0, "seed": 0, "stop": [], "json_schema": None,
                          "grammar": None})  # the model loads outside the timed part
        llm = CachedLLM(backend.settings, CallCache(folder / name), backend)
        rows.append(timed(name, llm, lambda llm=llm: [one(llm, item) for item in work]))
    server = LocalServer(model.path, 4096, threads)
    try:
        for concurrency in (1, 2, 4):
            name = f"server-c{concurrency}"
            llm = served_llm(server, model, CallCache(folder / name), concurrency)
            llm.backend._connected()  # the model list and identity check, outside the timing
            executor = ThreadedExecutor(concurrency)
            rows.append(timed(name, llm, lambda llm=llm, ex=executor: ex.map(llm, one, work)))
    finally:
        server.stop()
    base = rows[0]["chunks_per_min"]
    reference = rows[1]["triples"]
    for row in rows:
        row["vs_in_process"] = round(row["chunks_per_min"] / base, 2)
        row["same_triples"] = round(sum(a == b for a, b in zip(row.pop("triples"), reference))
                                    / len(work), 3)
    return rows


def quickstart_rows(folder: Path) -> list[dict[str, Any]]:
    """The quickstart in-process and through a server, each on a fresh cache, and the
    served spec's warm rerun."""
    model = resolve_llm("gemma3-270m")
    spec = yaml.safe_load(QUICKSTART.read_text())
    project = folder / "project"
    (project / "specs").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    shutil.copytree(REPO / "corpora", project / "corpora")
    rows = []
    server = LocalServer(model.path, 8192, usable_cores())
    try:
        served_model = {**spec["models"]["llm"], "server": server.url, "model": str(model.path),
                        "identity": f"sha256:{model.sha256}", "concurrency": 1}
        variants = (("in-process", spec["models"]["llm"]), ("server", served_model),
                    ("server, warm rerun", served_model))
        for run, (label, llm) in enumerate(variants):
            name = "quickstart-server" if label.startswith("server") else "quickstart-local"
            body = {**spec, "name": name, "models": {**spec["models"], "llm": llm}}
            if label.startswith("server"):  # in-process answers come from the usual cache
                body["cache"] = {"dir": str(folder / "cache-server")}
            path = project / "specs" / f"{name}.yaml"
            path.write_text(yaml.safe_dump(body))
            started = time.perf_counter()
            result = api.run(path, echo=lambda line: None)
            wall = time.perf_counter() - started
            calls = sum(s["llm"]["calls"] for s in result.manifest.steps)
            hits = sum(s["llm"]["cache_hits"] for s in result.manifest.steps)
            rows.append({"run": label, "wall_s": round(wall, 1), "llm_calls": calls,
                         "cache_hits": hits, "metrics": result.metrics})
            print(f"quickstart {label}: {wall:.1f} s, {calls} calls", file=sys.stderr, flush=True)
    finally:
        server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--skip-quickstart", action="store_true")
    parser.add_argument("--skip-extraction", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    out: dict[str, Any] = {"cores": usable_cores()}
    with tempfile.TemporaryDirectory(prefix="kgrag-server-bench-") as tmp:
        if not args.skip_extraction:
            out["extraction"] = extraction_rows(args.chunks, Path(tmp) / "extraction")
            print(format_table(out["extraction"], COLUMNS))
        if not args.skip_quickstart:
            out["quickstart"] = quickstart_rows(Path(tmp) / "quickstart")
            print(json.dumps(out["quickstart"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
