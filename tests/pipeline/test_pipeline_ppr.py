"""Strategies ``ppr``, ``bm25`` and ``fusion`` end to end on real MuSiQue paragraphs, with
the stand-in LLM building the skeleton, and their bad input through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from kgrag.cli import main
from kgrag.contents.retrieved import RETRIEVED
from tests.conftest import write_spec
from tests.standin import RuleLLM, run_with

QUERY = [
    {"name": "dense", "strategy": "naive", "budget_tokens": [600, 1200]},
    {"name": "bm25", "strategy": "bm25", "budget_tokens": 600},
    {"name": "rrf", "strategy": "fusion", "fuse": ["dense", "bm25"], "budget_tokens": 600},
    {"name": "ppr", "strategy": "ppr", "skeleton": "skel", "budget_tokens": 600},
    {"name": "ppr-dense", "strategy": "ppr", "skeleton": "skel", "dense_seeds": 0.05,
     "budget_tokens": 600},
    {"name": "ppr-entities", "strategy": "ppr", "entities": "ents", "budget_tokens": 600},
]


def ppr_spec(project: Path, query: list[dict] = QUERY, **graph) -> Path:
    return write_spec(
        project, "ppr", corpus={"dataset": "musique", "path": "../corpus.jsonl", "limit": 2},
        graphs=[{"name": "skel", "kind": "skeleton", "beta": 1.0, **graph},
                {"name": "ents", "kind": "entities"}], query=query,
        answer={"questions": 0}, evaluate={"metrics": ["coverage", "recall@2", "recall@5"]})


def test_ppr_bm25_and_fusion_rows_beside_dense(project: Path) -> None:
    steps, rows, _ = run_with(ppr_spec(project), RuleLLM())
    assert set(rows) == {"dense@budget_tokens=600", "dense@budget_tokens=1200", "bm25", "rrf",
                         "ppr", "ppr-dense", "ppr-entities"}
    for name in ("bm25", "rrf", "ppr", "ppr-dense", "ppr-entities"):
        assert 0 <= rows[name]["recall@5"] <= 1 and rows[name]["context_tokens_mean"] <= 600
        assert steps[f"retrieve.{name}"]["llm"]["calls"] == 0
    folder = project / "outputs" / "ppr" / steps["retrieve.ppr"]["artefact"]
    traces = [json.loads(t) for t in pl.read_parquet(folder / RETRIEVED)["trace"]]
    linked = [t for t in traces if t["seeds"]]
    assert linked, "the stand-in's capitalised entities should link some question"
    for trace in linked:
        assert trace["scores"] and all(score >= 0 for score in trace["scores"].values())
    fallbacks = sum("fallback" in t for t in traces)
    assert steps["retrieve.ppr"].get("notes", {}).get("fallbacks", 0) == fallbacks
    # an entities build is the extraction alone, on every chunk
    assert "extract.ents" in steps and "skeleton.ents" not in steps and "core.ents" not in steps
    assert rows["ppr-entities"]["recall@5"] == rows["ppr"]["recall@5"]  # β = 1: same tables


def test_a_question_without_a_linkable_entity_is_a_counted_fallback(project: Path) -> None:
    # titles off and questions of stop words only: none links, every one is answered by
    # dense retrieval and counted
    query = [{"name": "ppr", "strategy": "ppr", "skeleton": "skel", "titles": False,
              "budget_tokens": 600}]
    lines = (project / "corpus.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        record["question"] = "What was it about?"
    (project / "corpus.jsonl").write_text("\n".join(map(json.dumps, records)) + "\n")
    steps, rows, _ = run_with(ppr_spec(project, query), RuleLLM())
    assert steps["retrieve.ppr"]["notes"]["fallbacks"] == 2
    assert rows["ppr"]["recall@5"] >= 0


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("query, message", [
    ([{"name": "p", "strategy": "ppr", "budget_tokens": 600}],
     "strategy ppr walks one graph: set one of 'skeleton', 'hierarchy' or 'entities'"),
    ([{"name": "p", "strategy": "ppr", "skeleton": "kw", "budget_tokens": 600}],
     "no skeleton graph named 'kw'"),
    ([{"name": "p", "strategy": "ppr", "skeleton": "skel", "damping": 1.0}], "damping"),
    ([{"name": "p", "strategy": "ppr", "skeleton": "skel", "damping": 0}], "damping"),
    ([{"name": "p", "strategy": "ppr", "skeleton": "skel", "fuse": ["a", "b"]}],
     "'fuse' is not a parameter of strategy ppr"),
    ([{"name": "f", "strategy": "fusion"}], "strategy fusion needs 'fuse'"),
    ([{"name": "d", "strategy": "naive"}, {"name": "f", "strategy": "fusion",
                                          "fuse": ["d", "nothing"]}],
     "no other query entry named 'nothing'"),
    ([{"name": "k", "strategy": "ket", "bipartite": "kw", "theta": 0},
      {"name": "d", "strategy": "naive"}, {"name": "f", "strategy": "fusion", "fuse": ["k", "d"]}],
     "'k' is a ket entry"),
    ([{"name": "d", "strategy": "naive"}, {"name": "f", "strategy": "fusion", "fuse": ["d", "d"]}],
     "two different entries"),
    ([{"name": "k", "strategy": "ket", "skeleton": "skel", "theta": 1, "damping": 0.5}],
     "'damping' is not a parameter of strategy ket unless skeleton_search: ppr"),
    ([{"name": "k", "strategy": "ket", "skeleton": "skel", "theta": 1, "skeleton_search": "ppr",
       "damping": 1.0}], "damping"),
    ([{"name": "k", "strategy": "ket", "bipartite": "kw", "theta": 0,
       "skeleton_search": "ppr"}], "theta 0 gives it no budget"),
    ([{"name": "p", "strategy": "ppr", "skeleton": "skel", "question_mentions": True}],
     "question_mentions finds mentions with the nlp extraction's spaCy pipeline"),
    ([{"name": "p", "strategy": "ppr", "skeleton": "skel", "nearest_names": 0.8}],
     "nearest_names links question mentions no name matches; set question_mentions"),
])
def test_bad_ppr_and_fusion_specs_exit_2_with_one_message(project, capsys, query, message):
    spec = write_spec(project, graphs=[{"name": "skel", "kind": "skeleton"},
                                       {"name": "kw", "kind": "bipartite"}], query=query)
    code, _, err = run_cli(capsys, "run", str(spec), "--dry-run")
    assert code == 2
    assert message in err and err.startswith("kgrag: error:")
    assert "Traceback" not in err


def test_ppr_channels_read_the_extraction_and_off_values_leave_configs_alone(project: Path
                                                                            ) -> None:
    from kgrag import api

    query = [
        {"name": "skeleton", "strategy": "ket", "skeleton": "skel", "theta": 1},
        {"name": "local", "strategy": "ket", "skeleton": "skel", "theta": 1,
         "skeleton_search": "local"},
        {"name": "walked", "strategy": "ket", "skeleton": "skel", "theta": 1,
         "skeleton_search": "ppr", "dense_seeds": 0.05},
    ]
    plan = api.open_session(ppr_spec(project, query)).plan
    steps = {step.name: step for step in plan.steps}
    # an explicit off value is the default: the same config (so the same fingerprint)
    local, skeleton = (dict(steps[f"retrieve.{n}"].config["strategy"]) for n in ("local",
                                                                             "skeleton"))
    assert {**local, "name": "skeleton"} == skeleton
    walked = steps["retrieve.walked"]
    assert walked.config["strategy"]["dense_seeds"] == 0.05
    assert walked.config["strategy"]["damping"] == 0.5  # the walk's defaults, as ppr's
    assert "damping" not in steps["retrieve.skeleton"].config["strategy"]
    assert "extract.skel" in walked.inputs.values()
    assert "skeleton.skel" not in walked.inputs.values()
