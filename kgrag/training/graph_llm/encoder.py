"""RAS's graph encoder (App. C.2): per-sub-query subgraphs → one soft token for the LLM.

Each subgraph becomes a graph whose nodes are its unique subject/object strings and whose
edges are its predicates, each with a reverse edge labelled ``inverse_<predicate>`` (so
information flows both ways). Node and edge features are the embedder's vectors of those
texts. A Graph Transformer (PyG ``TransformerConv`` with edge features, Shi et al.) encodes
every subgraph; node states are mean-pooled per subgraph, subgraphs are averaged per sample
(the authors' code: one graph token; a sample without a graph pools to the zero vector),
and the projector Linear → Sigmoid → Linear maps that to the LLM's hidden size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Graph:
    """One subgraph: node texts, directed edges (source, target) and each edge's text."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    relations: tuple[str, ...]


def graph_of(triples: Iterable[Triple]) -> Graph:
    """Nodes deduplicated by exact string (first-seen order); a repeated triple is one fact;
    every edge s→o has its reverse o→s labelled ``inverse_<p>``."""
    nodes: dict[str, int] = {}
    edges: list[tuple[int, int]] = []
    relations: list[str] = []
    for subject, predicate, obj in dict.fromkeys(tuple(t) for t in triples):
        s = nodes.setdefault(subject, len(nodes))
        o = nodes.setdefault(obj, len(nodes))
        edges += [(s, o), (o, s)]
        relations += [predicate, f"inverse_{predicate}"]
    return Graph(tuple(nodes), tuple(edges), tuple(relations))


def texts_of(graphs: Iterable[Graph]) -> list[str]:
    """Every node and edge text of ``graphs``, once each, in first-seen order."""
    seen: dict[str, None] = {}
    for g in graphs:
        seen.update(dict.fromkeys(g.nodes + g.relations))
    return list(seen)


@dataclass(frozen=True)
class GraphBatch:
    """The subgraphs of a batch of samples as one disjoint graph, texts as feature rows."""

    node_rows: torch.Tensor  # (N,) row of each node's text in the feature table
    edge_index: torch.Tensor  # (2, E)
    edge_rows: torch.Tensor  # (E,)
    node_graph: torch.Tensor  # (N,) subgraph of each node
    graph_sample: torch.Tensor  # (G,) sample of each subgraph
    samples: int


def batch_of(samples: Sequence[Sequence[Graph]], rows: dict[str, int]) -> GraphBatch:
    """One ``GraphBatch``; subgraphs without nodes are left out (they carry nothing)."""
    node_rows: list[int]
    graph_sample: list[int]
    node_rows, edge_rows, sources, targets, node_graph, graph_sample = [], [], [], [], [], []
    for sample, graphs in enumerate(samples):
        for g in graphs:
            if not g.nodes:
                continue
            offset = len(node_rows)
            node_graph += [len(graph_sample)] * len(g.nodes)
            graph_sample.append(sample)
            node_rows += [rows[t] for t in g.nodes]
            edge_rows += [rows[t] for t in g.relations]
            sources += [offset + s for s, _ in g.edges]
            targets += [offset + t for _, t in g.edges]

    def long(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.long)

    return GraphBatch(long(node_rows), torch.stack([long(sources), long(targets)]),
                      long(edge_rows), long(node_graph), long(graph_sample), len(samples))


def pool(states: torch.Tensor, batch: GraphBatch) -> torch.Tensor:
    """Mean over each subgraph's nodes, then over each sample's subgraphs: (samples, d);
    a sample without subgraphs gets the zero vector."""
    graphs = len(batch.graph_sample)
    per_graph = _mean(states, batch.node_graph, graphs)
    return _mean(per_graph, batch.graph_sample, batch.samples)


def _mean(values: torch.Tensor, groups: torch.Tensor, count: int) -> torch.Tensor:
    sums = values.new_zeros(count, values.shape[-1]).index_add(0, groups, values)
    sizes = torch.zeros(count, dtype=values.dtype).index_add(
        0, groups, torch.ones(len(groups), dtype=values.dtype))
    return sums / sizes.clamp(min=1).unsqueeze(-1)


class GraphEncoder(nn.Module):
    """Graph Transformer over text features, pooling, and the projector to the LLM."""

    def __init__(self, features: int, hidden: int, layers: int, heads: int, dropout: float,
                 out: int) -> None:
        from torch_geometric.nn import TransformerConv

        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
        self.convs = nn.ModuleList(
            TransformerConv(features if i == 0 else hidden, hidden // heads, heads=heads,
                            edge_dim=features, dropout=dropout)
            for i in range(layers))
        # LayerNorm, not the authors' BatchNorm: a batch may hold a single one-node graph
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers - 1))
        self.dropout = nn.Dropout(dropout)
        self.projector = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.Sigmoid(),
                                       nn.Linear(2 * hidden, out))

    def forward(self, batch: GraphBatch, table: torch.Tensor) -> torch.Tensor:
        """One soft token per sample: (samples, out)."""
        x = table[batch.node_rows]
        edges = table[batch.edge_rows]
        for i, conv in enumerate(self.convs):
            x = conv(x, batch.edge_index, edges)
            if i < len(self.norms):
                x = self.dropout(torch.relu(self.norms[i](x)))
        return self.projector(pool(x, batch))
