"""A question's own subgraph, drawn in the report beside what a graph walk retrieved: the
seed entities the question named, the entities the walk left most mass on, the chunks
it returned, and the edges among them (an entity's mention of a chunk, a relationship
between two entities), as ``kgrag.retrieval.ppr_search`` records them in the trace.

The figure is an inline SVG laid out here (networkx's spring layout, seeded, so the
same run draws the same figure), so the page stays one file that reads nothing else:
no script draws it. Each node has a ``<title>`` that a browser shows on hover; a chunk
node is a link to that unit in the list beside it (its rank, as the list numbers it).
"""

from __future__ import annotations

from html import escape
from typing import Any

import networkx as nx

MAX_SEEDS = 8  # of the question's seeds, at most this many are drawn (by weight)
MAX_CHUNKS = 12  # of the chunks returned, the best this many
MAX_NODES = 30  # the reached entities fill the rest, best first
WIDTH, HEIGHT, MARGIN = 460, 320, 28  # pixels
LABEL_ROOM = 110  # pixels right of the rightmost node, for its label
LABEL_CHARS = 18  # an entity's label is cut here (its title holds the whole name)
SEED, REACHED, CHUNK = "seed", "reached", "chunk"


def walk_figure(trace: dict[str, Any], unit_ids: list[str], anchor: str) -> str:
    """The SVG of the subgraph a walk's ``trace`` records for the units ``unit_ids`` (rank
    order), each chunk node linked to ``#<anchor>-<rank>``; "" for a trace without one (a
    strategy that does not walk, or a walk that fell back to the dense ranking)."""
    edges = trace.get("subgraph")
    if not edges:
        return ""
    graph = _subgraph(trace, unit_ids, edges)
    where = _layout(graph)
    lines = [(f'<svg class="walk" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
              f'height="{HEIGHT}" role="img" aria-label="the question\'s subgraph">')]
    for a, b in graph.edges:
        kind = "mention" if CHUNK in (graph.nodes[a]["kind"], graph.nodes[b]["kind"]) \
            else "relation"
        (x1, y1), (x2, y2) = where[a], where[b]
        lines.append(f'<line class="{kind}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" '
                     f'y2="{y2:.1f}"/>')
    for node, data in graph.nodes(data=True):
        lines.append(_node(node, data, where[node], anchor))
    lines.append("</svg>")
    legend = ('<div class="muted walk-legend">● seed entity ○ entity the walk reached '
              "■ chunk returned (a click shows it); hover for names and mass</div>")
    return f'<figure class="walk">{"".join(lines)}{legend}</figure>'


def _subgraph(trace: dict[str, Any], unit_ids: list[str],
              edges: dict[str, list[list[str]]]) -> nx.Graph:
    """The drawn nodes, at most ``MAX_NODES``, and the recorded edges among them."""
    graph = nx.Graph()
    seeds = sorted(trace.get("seeds", {}).items(), key=lambda item: -item[1])[:MAX_SEEDS]
    for name, weight in seeds:
        graph.add_node(f"e:{name}", kind=SEED, name=name, title=f"seed {name} (weight "
                       f"{weight:.3g})")
    scores = trace.get("scores", {})
    for rank, unit in enumerate(unit_ids[:MAX_CHUNKS], 1):
        mass = f", mass {scores[unit]:.3g}" if unit in scores else ""
        graph.add_node(f"c:{unit}", kind=CHUNK, name=str(rank), rank=rank,
                       title=f"[{rank}] {unit}{mass}")
    room = MAX_NODES - graph.number_of_nodes()
    for name, mass in list(trace.get("reached", {}).items())[:max(room, 0)]:
        graph.add_node(f"e:{name}", kind=REACHED, name=name, title=f"{name} (mass {mass:.3g})")
    for name, unit in edges.get("mentions", []):
        if f"e:{name}" in graph and f"c:{unit}" in graph:
            graph.add_edge(f"e:{name}", f"c:{unit}")
    for a, b in edges.get("relations", []):
        if f"e:{a}" in graph and f"e:{b}" in graph:
            graph.add_edge(f"e:{a}", f"e:{b}")
    return graph


def _layout(graph: nx.Graph) -> dict[str, tuple[float, float]]:
    """Each node's place in the figure's pixels: a seeded spring layout, scaled into the
    frame with room for the labels, which are written right of their nodes."""
    if graph.number_of_nodes() == 1:
        return {node: (WIDTH / 2, HEIGHT / 2) for node in graph}
    raw = nx.spring_layout(graph, seed=0)
    xs = [float(x) for x, _ in raw.values()]
    ys = [float(y) for _, y in raw.values()]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    return {node: (MARGIN + (float(x) - min(xs)) / span_x * (WIDTH - MARGIN - LABEL_ROOM),
                   MARGIN + (float(y) - min(ys)) / span_y * (HEIGHT - 2 * MARGIN))
            for node, (x, y) in raw.items()}


def _node(node: str, data: dict[str, Any], at: tuple[float, float], anchor: str) -> str:
    x, y = at
    title = f"<title>{escape(data['title'])}</title>"
    if data["kind"] == CHUNK:
        return (f'<a href="#{anchor}-{data["rank"]}" class="chunk">{title}'
                f'<rect x="{x - 8:.1f}" y="{y - 8:.1f}" width="16" height="16"/>'
                f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">'
                f'{escape(data["name"])}</text></a>')
    name = data["name"]
    label = name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"
    return (f'<g class="{data["kind"]}">{title}<circle cx="{x:.1f}" cy="{y:.1f}" r="6"/>'
            f'<text x="{x + 8:.1f}" y="{y - 6:.1f}">{escape(label)}</text></g>')
