"""What the report shows of a real run: a curve per swept parameter through the rows
that differ only in it, every node of every build's graph in its degree distribution,
and every question with every strategy's units, answer and trace, a PPR walk's as the
question's subgraph drawn."""

from __future__ import annotations

import dataclasses
import json
import re
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
from kgrag.report.walk import MAX_NODES, walk_figure


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
    assert re.search(r'<li id="q\d+-s\d+-\d+" class="gold"><details class="unit"><summary>★ ',
                     page)


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


def drawn(figure: str) -> dict[str, list[str]]:
    """The figure's nodes by kind: seeds' and reached entities' hover titles, chunk links."""
    return {"seed": re.findall(r'<g class="seed"><title>(.*?)</title>', figure),
            "reached": re.findall(r'<g class="reached"><title>(.*?)</title>', figure),
            "chunk": re.findall(r'<a href="#([^"]+)" class="chunk">', figure)}


def test_a_walk_is_drawn_as_the_question_s_subgraph_linked_to_its_units(
        finished_run: Path, report_page: Path) -> None:
    """Was: the walk's seeds and scores as a line of text; now a figure of the seeds, the
    entities reached and the chunks returned, each chunk a link to its unit."""
    page = report_page.read_text().split('<section id="questions">')[1]
    run = RunFolder.open(finished_run)
    strategies = [row["strategy"] for row in run.metrics["rows"]]
    ppr = strategies.index("ppr")
    walked = 0
    for number, row in enumerate(read_retrieved(run.artefact("retrieve.ppr")).iter_rows(
            named=True)):
        trace = json.loads(row["trace"])
        question = page.split('<details class="question">')[number + 1]
        figures = re.findall(r'<tr class="walk">.*?</tr>', question)
        if "subgraph" not in trace:  # the dense fallback: nothing walked, nothing drawn
            assert not figures
            continue
        walked += 1
        [figure] = figures  # the ppr row's alone: the other strategies walk no subgraph
        nodes = drawn(figure)
        assert [title.split(" (weight")[0] for title in nodes["seed"]] == [
            f"seed {escape(name)}" for name, _ in sorted(trace["seeds"].items(),
                                                        key=lambda item: -item[1])]
        assert nodes["chunk"] == [f"q{number}-s{ppr}-{rank}"
                                  for rank in range(1, len(row["unit_ids"]) + 1)]
        for target in nodes["chunk"]:  # each link lands on its unit in the list
            assert f'<li id="{target}"' in question
        assert sum(map(len, nodes.values())) <= MAX_NODES
        assert figure.count('<line class="mention"') == len(trace["subgraph"]["mentions"]) > 0
        assert "<dt>subgraph</dt>" not in question and "<dt>reached</dt>" in question
    assert walked  # some question named an entity of the graph


def test_the_walk_figure_is_bounded() -> None:
    trace = {"seeds": {f"S{i}": 1.0 / (i + 1) for i in range(20)},
             "reached": {f"R{i}": 0.5 / (i + 1) for i in range(50)},
             "scores": {f"c{i}": 0.1 for i in range(20)},
             "subgraph": {"mentions": [[f"S{i}", f"c{i}"] for i in range(20)],
                          "relations": [["S0", "R0"], ["R0", "R49"]]}}
    figure = walk_figure(trace, [f"c{i}" for i in range(20)], "q3-s1")
    nodes = drawn(figure)
    assert len(nodes["seed"]) == 8 and len(nodes["chunk"]) == 12
    assert sum(map(len, nodes.values())) == MAX_NODES
    assert nodes["seed"][0] == "seed S0 (weight 1)" and nodes["chunk"][-1] == "q3-s1-12"
    # only the edges between drawn nodes: S0–c0 … S7–c7 and S0–R0 (R49 is not drawn)
    assert figure.count('<line class="mention"') == 8 and figure.count('class="relation"') == 1
    assert walk_figure({"seeds": {}, "fallback": "dense"}, ["c1"], "q0-s0") == ""
    assert figure == walk_figure(trace, [f"c{i}" for i in range(20)], "q3-s1")  # same layout
