"""What the report shows of a real run: a curve per swept parameter through the rows
that differ only in it, every node of every build's graph in its degree distribution,
and every question with every strategy's units, answer and trace."""

from __future__ import annotations

import dataclasses
import json
import shutil
from html import escape
from pathlib import Path

from kgrag.contents.bipartite import read_edges
from kgrag.contents.corpus import read_questions
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.metrics import read_metrics, write_metrics
from kgrag.contents.retrieved import read_retrieved
from kgrag.declarations import step_name
from kgrag.pipeline.graph_kinds import GRAPH_KINDS
from kgrag.report.figures import metric_bars, score_columns, sweep_curves
from kgrag.report.page import write_report
from kgrag.report.run_folder import RunFolder


def test_bars_show_each_metric_the_spec_asked_for(finished_run: Path) -> None:
    rows = read_metrics(finished_run)["rows"]
    assert score_columns(rows) == ["em", "f1", "coverage", "recall@2", "recall@5"]
    bars = metric_bars(rows)
    assert [bar.name for bar in bars.data] == score_columns(rows)
    coverage = next(bar for bar in bars.data if bar.name == "coverage")
    assert list(coverage.x) == [row["strategy"] for row in rows]
    assert list(coverage.y) == [row["coverage"] for row in rows]


def test_a_sweep_curve_joins_the_rows_that_differ_only_in_its_parameter(
        finished_run: Path) -> None:
    rows = {row["strategy"]: row for row in read_metrics(finished_run)["rows"]}
    curves = sweep_curves(list(rows.values()))
    assert list(curves) == ["budget_tokens", "beta", "theta"]
    shown = {trace.name: trace for trace in curves["theta"].data if trace.visible}
    assert set(shown) == {"ket@beta=0.2", "ket@beta=0.4"}  # coverage, shown first
    for beta in (0.2, 0.4):
        line = shown[f"ket@beta={beta}"]
        assert list(line.x) == [0, 0.5]
        assert list(line.y) == [rows[f"ket@beta={beta},theta={t}"]["coverage"] for t in (0, 0.5)]
    budget = [trace for trace in curves["budget_tokens"].data if trace.visible]
    assert [(t.name, list(t.x)) for t in budget] == [("dense", [300, 600])]
    # the menu offers every score, each showing its own lines only
    menu = curves["beta"].layout.updatemenus[0]
    assert [button.label for button in menu.buttons] == score_columns(list(rows.values()))
    for button in menu.buttons:
        visible = [t for t, on in zip(curves["beta"].data, button.args[0]["visible"]) if on]
        assert len(visible) == 2 and all(t.legendgroup.startswith("ket@") for t in visible)


def test_degrees_count_every_node_and_edge_of_each_build(finished_run: Path) -> None:
    run = RunFolder.open(finished_run)
    for build in run.metrics["builds"]:
        view = GRAPH_KINDS[build["kind"]].view
        folder = run.artefact(step_name(view.artefact, build["graph"]))
        degrees = view.degrees(folder)
        if build["kind"] == "bipartite":
            assert len(degrees) == build["keywords"]
            assert sum(degrees) == read_edges(folder).height
        else:  # every relationship has two ends
            assert len(degrees) == read_entities(folder).height > 0
            assert sum(degrees) == 2 * read_relationships(folder).height > 0


def test_the_drilldown_shows_each_question_and_what_each_strategy_did(
        finished_run: Path, report_page: Path) -> None:
    page = report_page.read_text().split('<section id="questions">')[1]
    run = RunFolder.open(finished_run)
    questions = read_questions(run.artefact("corpus"))
    strategies = [row["strategy"] for row in run.metrics["rows"]]
    assert page.count('<details class="question">') == questions.height == 2
    for name in strategies:
        assert page.count(f"<tr><td>{escape(name)}</td>") == questions.height
    for question in questions.iter_rows(named=True):
        assert escape(question["question"]) in page
        assert f"<b>gold answer</b> {escape(question['answers'][0])}" in page
    hug = read_retrieved(run.artefact(step_name("retrieve", "hug")))
    trace = json.loads(hug["trace"][0])
    assert {"seeds", "reached", "filter"} <= trace.keys()
    assert f"<dt>seeds</dt><dd>{escape(', '.join(trace['seeds']))}</dd>" in page
    # units in rank order, supporting documents marked
    first = read_retrieved(run.artefact(step_name("retrieve", strategies[0]))).row(0, named=True)
    units = [page.index(f"<code>{escape(unit)}</code>") for unit in first["unit_ids"]]
    assert units == sorted(units)
    assert '<li class="gold"><details class="unit"><summary>★ ' in page


def test_the_training_section_is_there_only_when_the_spec_trains(
        finished_run: Path, report_page: Path, tmp_path: Path) -> None:
    """Was: a Training section saying "no training in this spec" in every report."""
    page = report_page.read_text()
    assert 'id="training"' not in page and 'href="#training"' not in page
    trained = tmp_path / "trained"
    shutil.copytree(finished_run, trained)
    run = RunFolder.open(trained)
    rows = [{"graph": "ark", "kind": "ark", "wall_s": 12.5, "stage1_loss": 0.42},
            {"graph": "ark_s1", "kind": "ark", "wall_s": 3.0}]
    write_metrics(run.artefact("evaluate"), {**run.metrics, "training": rows})
    page = write_report(trained).read_text()
    section = page.split('<section id="training">')[1].split("</section>")[0]
    assert 'href="#training"' in page
    assert section.count("<tr><td>") == 2 and "<th>stage1_loss</th>" in section
    assert "<td>ark_s1</td>" in section and "<th>llm_calls</th>" not in section  # only held


def test_builds_of_a_run_that_evaluated_nothing_are_those_evaluate_reports(
        finished_run: Path) -> None:
    """A run without questions has no metrics: its build rows are made from the steps'
    records, as the evaluate step makes them (skeleton sweeps, keywords, hierarchy)."""
    run = RunFolder.open(finished_run)
    indexing = [step for step in run.manifest["steps"]
                if step["kind"] not in ("retrieve", "answer", "evaluate")]
    unevaluated = dataclasses.replace(run, metrics=None,
                                      manifest={**run.manifest, "steps": indexing})
    assert unevaluated.builds == run.metrics["builds"]
    assert [b["graph"] for b in unevaluated.builds] == ["skel@beta=0.2", "skel@beta=0.4", "kw",
                                                        "h"]
