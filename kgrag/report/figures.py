"""The report's plots, as plotly figures drawn from ``metrics.json`` rows and the builds'
graphs: a strategy's scores, how a score moves along each swept parameter, what each
graph build cost and made, and its graph's degree distribution.

Each function returns None when the run has nothing to draw for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kgrag.eval.registry import lookup
from kgrag.sweeps import label

Row = dict[str, Any]
HEIGHT = 420  # pixels, every figure
SWEEP_METRIC = "coverage"  # the score a sweep figure shows first, when the run has it


def score_columns(rows: Sequence[Row]) -> list[str]:
    """The strategy metrics the rows were scored on (shares between 0 and 1: EM, F1,
    coverage, recall@k, context recall), in the order the rows list them."""
    return [key for key in dict.fromkeys(k for row in rows for k in row) if _is_score(key)]


def _is_score(column: str) -> bool:
    try:
        metric, _ = lookup(column)
    except (KeyError, ValueError):  # a cost or count column, or a family's bad cut-off
        return False
    return not metric.per_build


def metric_bars(rows: Sequence[Row]) -> go.Figure | None:
    """One group of bars per strategy, a bar per metric."""
    scores = score_columns(rows)
    if not scores:
        return None
    names = [row["strategy"] for row in rows]
    figure = go.Figure([go.Bar(name=score, x=names, y=[row.get(score) for row in rows])
                        for score in scores])
    return _laid_out(figure, "score", barmode="group", yaxis_range=[0, 1])


def sweep_curves(rows: Sequence[Row]) -> dict[str, go.Figure]:
    """Swept parameter → a figure with a line per series of rows that differ only in that
    parameter (the same spec entry, the same other swept values), and a menu choosing
    the score it shows (coverage first)."""
    scores = score_columns(rows)
    if not scores:
        return {}
    swept = dict.fromkeys(key for row in rows for key in row.get("params", {}))
    first = scores.index(SWEEP_METRIC) if SWEEP_METRIC in scores else 0
    figures = {}
    for key in swept:
        series: dict[str, list[Row]] = {}
        for row in rows:
            params = row.get("params", {})
            if key in params:
                entry = row["strategy"].removesuffix(label("", params))
                others = {k: v for k, v in params.items() if k != key}
                series.setdefault(label(entry, others), []).append(row)
        figure = go.Figure()
        for index, score in enumerate(scores):
            for name, members in series.items():
                members = sorted(members, key=lambda row: row["params"][key])
                figure.add_trace(go.Scatter(
                    x=[row["params"][key] for row in members],
                    y=[row.get(score) for row in members], name=name, mode="lines+markers",
                    visible=index == first, legendgroup=name))
        shown = [[i == s for s in range(len(scores)) for _ in series]
                 for i in range(len(scores))]
        figure.update_layout(updatemenus=[{
            "active": first, "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom",
            "buttons": [{"label": score, "method": "update",
                         "args": [{"visible": shown[i]}, {"yaxis.title.text": score}]}
                        for i, score in enumerate(scores)]}])
        figures[key] = _laid_out(figure, scores[first], xaxis_title=key, yaxis_range=[0, 1],
                                 showlegend=True)
    return figures


COST = (("wall_s", "wall seconds"), ("llm_calls", "LLM calls paid"),
        ("cache_hits", "LLM requests the cache answered"), ("tokens_in", "LLM tokens in"),
        ("tokens_out", "LLM tokens out"), ("embeddings", "embeddings"))
PANELS = 3  # cost panels in a row
SIZE = ("entities", "relationships", "modules", "gates", "keywords", "subchunks",
        "core_chunks")


def build_costs(builds: Sequence[Row]) -> go.Figure | None:
    """What each graph build cost when it was built, a panel per cost that some build
    paid (an LLM-free build's LLM panels would be empty axes); the cost of a build made
    by an older kgrag is unknown and left out. None when no build cost anything."""
    paid = [(key, title) for key, title in COST if any(build.get(key) for build in builds)]
    if not paid:
        return None
    graphs = [build["graph"] for build in builds]
    rows = -(-len(paid) // PANELS)
    figure = make_subplots(rows=rows, cols=min(len(paid), PANELS),
                           subplot_titles=[title for _, title in paid], vertical_spacing=0.25)
    for index, (key, title) in enumerate(paid):
        figure.add_trace(go.Bar(x=graphs, y=[build.get(key) for build in builds], name=title,
                                showlegend=False), row=index // PANELS + 1,
                         col=index % PANELS + 1)
    return _laid_out(figure, None, height=rows * HEIGHT)


def graph_sizes(builds: Sequence[Row]) -> go.Figure | None:
    """What each build made: entities, relationships, modules, gates, keywords…"""
    present = [key for key in SIZE if any(key in build for build in builds)]
    if not present:
        return None
    graphs = [build["graph"] for build in builds]
    figure = go.Figure([go.Bar(name=key, x=graphs, y=[build.get(key) for build in builds])
                        for key in present])
    return _laid_out(figure, "count (log)", barmode="group", yaxis_type="log")


def degree_distributions(degrees: dict[str, tuple[str, list[int]]]) -> go.Figure | None:
    """Build → (what its nodes are, each node's degree): how many nodes have each
    degree, a line per build."""
    if not degrees:
        return None
    figure = go.Figure()
    for graph, (nodes, values) in degrees.items():
        counts = sorted(Counter(values).items())
        figure.add_trace(go.Scatter(x=[d for d, _ in counts], y=[n for _, n in counts],
                                    mode="lines+markers", name=f"{graph} ({nodes})"))
    return _laid_out(figure, "nodes (log)", xaxis_title="degree", yaxis_type="log")


def _laid_out(figure: go.Figure, y_title: str | None, height: int = HEIGHT,
              **layout: Any) -> go.Figure:
    figure.update_layout(height=height, template="plotly_white", yaxis_title=y_title,
                         margin={"l": 60, "r": 20, "t": 60, "b": 40},
                         legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
                         **layout)
    figure.update_xaxes(automargin=True)
    return figure
