"""The LLM-free build on a real two-node Ray cluster: spaCy's parses and the embedder's
vectors computed by Ray workers on two nodes of one CPU each, started here with ``ray
start`` as a user starts them, write exactly what a local run writes; a worker killed
mid-step costs its batch only; an address that does not answer is one error.

The nodes run on this machine (127.0.0.1), started and stopped by ``tests.ray_nodes``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kgrag import api, cli
from kgrag.contents.dense import open_dense
from kgrag.contents.metrics import read_metrics
from kgrag.errors import KgragError
from kgrag.graphs.extraction.nlp import BATCH_SIZE, Chunk, NlpExtractor
from kgrag.models import ray_actors
from kgrag.models.cache import CallCache
from kgrag.models.executor import RayExecutor
from kgrag.models.pipelines import resolve_pipeline
from kgrag.pipeline.integrity import file_listing
from kgrag.pipeline.runner import run_plan
from tests.conftest import SHARED_DATA, make_project, write_spec
from tests.ray_nodes import RAY, DyingParser, ray_nodes

ray = pytest.importorskip("ray")

QUESTIONS = 7  # 2Wiki questions: 70 paragraphs, two batches of each kind
UNREACHABLE = "127.0.0.1:1"

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir() or not RAY.is_file(),
                                reason="reads ../shared/data, starts the ray CLI")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """Two nodes of one CPU each on 127.0.0.1 (``tests.ray_nodes``); their address."""
    with ray_nodes(2) as address:
        yield address


def wiki_spec(root: Path, cache: Path, **executor) -> Path:
    """Dense and ppr over the nlp extraction of the first 2Wiki questions' paragraphs."""
    project = make_project(root)
    sections = {"corpus": {"dataset": "2wiki", "limit": QUESTIONS,
                           "path": str(SHARED_DATA / "2wiki_200.jsonl")},
                "cache": {"dir": str(cache)},
                "chunking": {"size": 256, "overlap": 32},
                "extraction": {"method": "nlp"},
                "graphs": [{"name": "kg", "kind": "entities"}],
                "query": [{"name": "dense", "strategy": "naive", "budget_tokens": 1000},
                          {"name": "ppr", "strategy": "ppr", "entities": "kg",
                           "phrases": "all", "dense_seeds": 0, "budget_tokens": 1000}],
                "answer": {"questions": 0},
                "evaluate": {"metrics": ["coverage", "recall@5"]}}
    if executor:
        sections["executor"] = executor
    return write_spec(project, "wiki", **sections)


def build(spec: Path) -> tuple[api.Session, dict[str, dict]]:
    session = api.open_session(spec)
    try:
        manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                            run_dir=session.run_dir, echo=lambda line: None)
    finally:
        session.cache.close()
    return session, {step["name"]: step for step in manifest.steps}


def parquet_files(session: api.Session, step: str) -> dict[str, str]:
    return {name: listed["sha256"] for name, listed in file_listing(session.artefact(step)).items()
            if name.endswith(".parquet")}


def test_an_address_that_does_not_answer_is_one_error_and_keeps_the_work_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not ray.is_initialized()  # a connection made before would be kept
    spec = wiki_spec(tmp_path / "p", tmp_path / "cache", kind="ray", address=UNREACHABLE)
    assert cli.main(["run", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and err[0].startswith(
        f"kgrag: error: the Ray address {UNREACHABLE} does not answer (")
    session = api.open_session(spec)  # what ran before the first batch is kept
    session.cache.close()
    assert session.artefact("corpus").is_dir() and session.artefact("chunks").is_dir()
    assert not session.artefact("extract.kg").exists()


def test_two_nodes_build_what_one_process_builds(tmp_path: Path, cluster: str) -> None:
    local, local_steps = build(wiki_spec(tmp_path / "local", tmp_path / "local-cache"))
    on_ray, ray_steps = build(wiki_spec(tmp_path / "ray", tmp_path / "ray-cache",
                                        kind="ray", address=cluster, workers=2))
    work = on_ray.models.executor
    assert isinstance(work, RayExecutor)
    chunks = ray_steps["dense"]["notes"]["vectors"]
    assert chunks > BATCH_SIZE  # two batches of parses and of vectors at least
    assert ray_steps["extract.kg"]["notes"]["parsed"] == chunks
    assert len(set(work.placements)) == 2 and work.lost == 0  # both nodes computed
    for step in local_steps:
        assert ray_steps[step]["fingerprint"] == local_steps[step]["fingerprint"]
        assert ray_steps[step].get("notes") == local_steps[step].get("notes"), step
    assert parquet_files(on_ray, "extract.kg") == parquet_files(local, "extract.kg")
    local_ids, local_vectors = open_dense(local.artefact("dense")).matrix()
    ray_ids, ray_vectors = open_dense(on_ray.artefact("dense")).matrix()
    assert ray_ids == local_ids and np.array_equal(ray_vectors, local_vectors)
    assert untimed(on_ray) == untimed(local)


def untimed(session: api.Session) -> list[dict]:
    """The metrics rows, less the retrieval latencies (a run's own)."""
    rows = read_metrics(session.run_dir)["rows"]
    return [{k: v for k, v in row.items() if "_ms" not in k} for row in rows]


def wiki_chunks() -> list[Chunk]:
    """Distinct real paragraphs, titled: three batches."""
    chunks: dict[tuple[str, str], Chunk] = {}
    with (SHARED_DATA / "2wiki_200.jsonl").open() as handle:
        for line in handle:
            for title, sentences in json.loads(line)["context"]:
                text = " ".join(sentences)
                chunks.setdefault((title, text), Chunk(f"c{len(chunks)}", text, title))
            if len(chunks) >= 3 * BATCH_SIZE:
                break
    return list(chunks.values())[:3 * BATCH_SIZE]


def dying(extractor: NlpExtractor, chunks: list[Chunk], batch: int, folder: Path) -> list[str]:
    """Make ``extractor``'s worker die on its ``batch``-th batch; the batches' first texts."""
    firsts = [c.text for c in chunks[::BATCH_SIZE]]
    extractor.parser = DyingParser(extractor.pipeline, firsts[batch], folder)
    return firsts


def begun(folder: Path) -> list[str]:
    return [json.loads(line) for line in (folder / "begun").read_text().splitlines()]


def test_a_worker_killed_mid_step_costs_its_batch_only(tmp_path: Path, cluster: str) -> None:
    chunks = wiki_chunks()
    pipeline = resolve_pipeline("en_core_web_sm")
    local = NlpExtractor(pipeline, CallCache(tmp_path / "local")).extract(chunks)
    on_ray = RayExecutor(cluster, 2)
    extractor = NlpExtractor(pipeline, CallCache(tmp_path / "ray"), executor=on_ray)
    firsts = dying(extractor, chunks, 2, tmp_path)
    assert extractor.extract(chunks) == local
    # the lost batch begun twice, every other batch once; each chunk parsed (stored) once
    assert sorted(begun(tmp_path)) == sorted([*firsts, firsts[2]])
    assert on_ray.lost == 1 and len(on_ray.placements) == len(firsts)
    assert extractor.parsed == len(chunks)


def test_workers_lost_past_the_allowance_end_the_step_and_a_rerun_resumes(
        tmp_path: Path, cluster: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_actors, "LOSSES_ALLOWED", 0)
    chunks = wiki_chunks()
    pipeline = resolve_pipeline("en_core_web_sm")
    cache = CallCache(tmp_path / "cache")
    on_ray = RayExecutor(cluster, 2)
    extractor = NlpExtractor(pipeline, cache, executor=on_ray)
    dying(extractor, chunks, 1, tmp_path)
    with pytest.raises(KgragError, match=r"^lost 1 Ray worker processes in one step.*"
                                         r"run again to resume"):
        extractor.extract(chunks)
    done = len(on_ray.placements)  # the batches back before the step ended: stored
    assert 1 <= done < len(chunks) // BATCH_SIZE
    rerun = NlpExtractor(pipeline, cache)  # here, or on Ray: only the rest is parsed
    fresh = NlpExtractor(pipeline, CallCache(tmp_path / "fresh")).extract(chunks)
    assert rerun.extract(chunks) == fresh
    assert (rerun.parsed, rerun.cache_hits) == (len(chunks) - done * BATCH_SIZE,
                                                done * BATCH_SIZE)


