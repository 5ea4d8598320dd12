"""``report.html``: one self-contained page of a finished run.

Sections: metric bars and the results table per strategy; a sweep curve per swept
parameter (budget, β, θ…); what each graph build cost, made and its degree
distribution; what each training entry cost (when the spec trains); every question with
what each strategy retrieved, with the units' text, and answered; the corpus. A run
whose corpus has no questions gets the corpus and the graph builds to browse. The
plotly JavaScript is inlined once in the head and every figure draws from it, so
the page reads nothing but itself: it opens offline, from disk or as a mail
attachment.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from kgrag.declarations import step_name
from kgrag.errors import writing
from kgrag.eval.report import (
    BUILD_COLUMNS,
    COLUMNS,
    TRAINING_COLUMNS,
    format_cell,
    table_columns,
)
from kgrag.pipeline.artefacts import write_text_atomic
from kgrag.pipeline.graph_kinds import GRAPH_KINDS
from kgrag.report.corpus import corpus_section
from kgrag.report.figures import (
    build_costs,
    degree_distributions,
    graph_sizes,
    metric_bars,
    sweep_curves,
)
from kgrag.report.questions import drilldown
from kgrag.report.run_folder import RunFolder

REPORT = "report.html"  # in the run folder
FIGURE = 'class="plotly-graph-div"'  # what a drawn figure's HTML holds
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
nav a { margin-right: 1.2em; } .muted { color: #777; } code { font-size: 90%; }
div.wide { overflow-x: auto; } table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
table.results td, table.results th { text-align: right; white-space: nowrap; }
table.results td:first-child, table.results th:first-child { text-align: left; }
details.question { border: 1px solid #ddd; margin: 0.4em 0; padding: 0.3em 0.7em; }
details.question summary { cursor: pointer; }
table.drill { width: 100%; min-width: 60em; } table.drill td:nth-child(3) { width: 50%; }
ol.units { margin: 0; padding-left: 2.2em; } ol.chunks { padding-left: 2.6em; }
li.gold { background: #fff1b8; } details.unit summary { cursor: pointer; }
.where { color: #555; font-style: italic; } .badge { background: #b26b00; color: #fff;
  border-radius: 3px; padding: 0 0.35em; font-size: 85%; }
div.text { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6;
  border-left: 3px solid #ccc; padding: 0.3em 0.6em; margin: 0.2em 0 0.5em; max-width: 60em; }
li.cited div.text { border-left-color: #b26b00; } mark { background: #ffc940; padding: 0 1px; }
dl.trace { margin: 0; }
svg.walk line { stroke: #bbb; stroke-width: 1; } svg.walk line.relation { stroke: #7a9cc6; }
svg.walk text { font-size: 10px; fill: #333; } svg.walk a.chunk rect { fill: #4a7ab5; }
svg.walk a.chunk text { fill: #fff; font-size: 9px; } svg.walk g.seed circle { fill: #b26b00; }
svg.walk g.reached circle { fill: #fff; stroke: #b26b00; stroke-width: 1.5; }
svg.walk a.chunk:hover rect { fill: #b26b00; } figure.walk { margin: 0.3em 0; }
dl.trace dt { font-weight: 600; } dl.trace dd { margin: 0 0 0.3em 1em; word-break: break-word; }
"""


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write the report of the finished run in ``run_dir`` (default: its
    ``report.html``) and return its path; a folder that holds no finished run (or one
    that evaluated nothing though its corpus has questions) is a ``KgragError``, and so
    is a folder the report cannot be written in."""
    page = _page(RunFolder.open(run_dir))
    path = run_dir / REPORT if out is None else out
    with writing(path.parent, f"the report {path.name}",
                 "free space there or make it writable (or write the report elsewhere "
                 "with kgrag report --output), then write it again"):
        write_text_atomic(path, page)
    return path


def _page(run: RunFolder) -> str:
    if run.metrics is None:  # a corpus without questions: what it holds and what was built
        sections = [("corpus", "Corpus", corpus_section(run)),
                    ("builds", "Graph builds", _builds(run, run.builds))]
    else:
        rows, training = run.metrics["rows"], run.metrics.get("training")
        sweeps = sweep_curves(rows)
        sections = [
            ("metrics", "Metrics per strategy",
             _figure(metric_bars(rows), "metrics") + _table(rows, COLUMNS)),
            ("sweeps", "Sweeps",
             "".join(f"<h3>against {escape(key)}</h3>" + _figure(figure, f"sweep-{key}")
                     for key, figure in sweeps.items())
             or '<p class="muted">no swept parameter in this spec</p>'),
            ("builds", "Graph builds", _builds(run, run.builds)),
            *([("training", "Training", _table(training, TRAINING_COLUMNS))] if training else []),
            ("questions", f"Questions ({run.metrics['n_questions']})",
             '<p class="muted">Click a question to open it.</p>' + drilldown(run)),
            ("corpus", "Corpus", corpus_section(run)),
        ]
    nav = "".join(f'<a href="#{key}">{escape(title)}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{escape(title)}</h2>{html}</section>'
                   for key, title, html in sections)
    # plotly's script is most of a page's size: only a page that draws a figure holds it
    script = f"<script>{get_plotlyjs()}</script>" if FIGURE in body else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<title>kgrag report: {escape(run.name)}</title>'
            f'<link rel="icon" href="data:,"><style>{STYLE}</style>'
            f"{script}</head>\n<body>"
            f"<h1>kgrag report: {escape(run.name)}</h1>{_summary(run)}<nav>{nav}</nav>\n"
            f"{body}</body></html>\n")


def _summary(run: RunFolder) -> str:
    manifest, metrics = run.manifest, run.metrics
    # the models the run's steps used, as its manifest names them (an LLM-free run, none)
    models = ", ".join(f"{role} {model['name']}" for role, model in manifest["models"].items())
    corpus = ("no questions to evaluate" if metrics is None
              else f"{escape(metrics['dataset'])}, {metrics['n_questions']} questions")
    return (f'<p class="muted">{corpus} · spec {escape(manifest["spec"])} · finished '
            f"{escape(manifest.get('finished', '?'))} · {escape(models or 'no model')} · kgrag "
            f"{escape(manifest['libraries'].get('kgrag', '?'))}</p>")


def _builds(run: RunFolder, builds: list[dict[str, Any]]) -> str:
    if not builds:
        return '<p class="muted">no graph build in this spec</p>'
    degrees = {}
    for build in builds:
        view = GRAPH_KINDS[build["kind"]].view
        folder = run.artefact(step_name(view.artefact, build["graph"]))
        degrees[build["graph"]] = (view.nodes, view.degrees(folder))
    costs = build_costs(builds)  # None: no build cost anything worth a panel
    started = [build["graph"] for build in builds if build.get("started_from")]
    rerun = ("" if not started else
             f'<p class="muted">{escape(", ".join(started))}: started from an earlier build '
             "of the same settings (started_from), so the cost shown is the rerun's, for what "
             "changed in the corpus, not a cold build's.</p>")
    return ("<h3>Cost when built</h3>" + rerun
            + ("" if costs is None else _figure(costs, "build-cost"))
            + _table(builds, BUILD_COLUMNS)
            + "<h3>What each build made</h3>" + _figure(graph_sizes(builds), "graph-size")
            + "<h3>Degree distribution</h3>"
            + _figure(degree_distributions(degrees), "degrees"))


def _figure(figure: go.Figure | None, name: str) -> str:
    if figure is None:
        return '<p class="muted">nothing to plot</p>'
    return pio.to_html(figure, include_plotlyjs=False, full_html=False, div_id=f"fig-{name}",
                       config=PLOT_CONFIG, default_height=f"{figure.layout.height}px")


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    keys = table_columns(rows, columns)
    head = "".join(f"<th>{escape(key)}</th>" for key in keys)
    body = "".join("<tr>" + "".join(f"<td>{escape(format_cell(row.get(key)))}</td>"
                                    for key in keys) + "</tr>" for row in rows)
    return (f'<div class="wide"><table class="results"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")
