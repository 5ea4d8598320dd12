"""A HolisQA spec end to end through import, chunk and evaluate (retrieval stood in, no LLM)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from kgrag import api
from kgrag.contents.chunks import CHUNKS_FILE
from kgrag.contents.corpus import QUESTIONS, SENTENCES
from kgrag.contents.metrics import METRICS
from kgrag.contents.retrieved import RETRIEVED, SCHEMA
from kgrag.steps import KINDS
from kgrag.steps.step import StepContext
from tests.conftest import SHARED_DATA, write_spec

EMPTY = {pl.Int64: 0, pl.Float64: 0.0, pl.String: ""}  # any other retrieved column stays blank


def test_holisqa_context_recall_from_the_step_artefacts(project: Path, tmp_path: Path):
    spec = write_spec(project, corpus={"dataset": "holisqa", "limit": 3,
                                       "path": str(SHARED_DATA / "holisqa" / "biology")},
                      query=[{"name": "text", "strategy": "naive"}],
                      evaluate={"metrics": ["recall@5", "context_recall"]})
    session = api.open_session(spec)
    steps = session.plan.by_name()
    assert steps["evaluate"].config["dataset"] == "holisqa"
    assert steps["evaluate"].inputs["chunks"] == "chunks"

    def run_step(name: str, inputs: dict[str, Path]) -> tuple[Path, StepContext]:
        out = tmp_path / name
        out.mkdir()
        ctx = StepContext(steps[name], session.spec, session.models, out, inputs)
        KINDS[steps[name].kind].run(ctx)
        return out, ctx

    corpus_dir, corpus_ctx = run_step("corpus", {})
    assert corpus_ctx.notes["sentences"] == pl.read_parquet(corpus_dir / SENTENCES).height > 0
    chunks_dir, _ = run_step("chunks", {"corpus": corpus_dir})
    questions = pl.read_parquet(corpus_dir / QUESTIONS)
    chunks = pl.read_parquet(chunks_dir / CHUNKS_FILE)

    def evaluate(pick_chunks) -> dict:
        """Stand in for the retrieve step with the chosen chunks, then evaluate."""
        rows = []
        for question_id, docs in zip(questions["question_id"],
                                     questions["supporting_doc_ids"].to_list()):
            ids = pick_chunks(chunks.filter(pl.col("doc_id").is_in(docs)))["chunk_id"].to_list()
            row = {"question_id": question_id, "unit_ids": [*ids, f"{ids[0]}/0"],
                   "doc_ids": docs, "context": "", "context_tokens": 1, "retrieval_ms": 1.0,
                   "trace": "{}"}
            rows.append({key: row.get(key, EMPTY.get(dtype)) for key, dtype in SCHEMA.items()})
        retrieved = tmp_path / "retrieve.text"
        retrieved.mkdir(exist_ok=True)
        pl.DataFrame(rows, schema=SCHEMA).write_parquet(retrieved / RETRIEVED)
        evaluate_dir = tmp_path / f"evaluate{len(list(tmp_path.glob('evaluate*')))}"
        evaluate_dir.mkdir()
        inputs = {"corpus": corpus_dir, "chunks": chunks_dir, "retrieve.text": retrieved}
        KINDS["evaluate"].run(StepContext(steps["evaluate"], session.spec, session.models,
                                          evaluate_dir, inputs))
        return json.loads((evaluate_dir / METRICS).read_text())["rows"][0]

    every = evaluate(lambda frame: frame)
    assert every["context_recall"] == 1.0
    assert every["recall@5"] == 1.0
    first_only = evaluate(lambda frame: frame.group_by("doc_id").first())
    assert 0.0 < first_only["context_recall"] < 1.0
