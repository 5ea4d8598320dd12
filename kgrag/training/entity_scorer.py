"""ReG@Entity's retriever: a PNA graph network (Corso et al. 2020, ``PNAConv``) scoring each
entity of a question graph, trained by binary cross-entropy over entities (ReG Eq. 34: an
entity is positive iff it appears in a positive triple); a triple's score is
s(τ) = p(h) + p(t), p the entity's predicted probability.

ReG gives neither depth, width nor aggregators [decide]; here: every entity starts from
ReLU(Linear(concat[entity, question, topic one-hot])) (textless entities share one learned
embedding, as in the triple scorer), then ``layers`` residual PNA layers x ← x + ReLU(PNA(x))
over the triples in both directions, each edge carrying its relation's projected embedding
plus a learned direction vector (forward or reversed); a relation's projection reads the
relation and the question, ReLU(Linear(concat[relation, question])), so that a message can
tell whether its relation fits the question, then Linear → ReLU → Linear to one
logit. The degree histogram PNA's scalers need is counted on the training graphs (in-degrees
over both directions) and saved with the weights. The hidden size defaults to 128, not the
embedding size, to keep CPU training of 2 CPU cores affordable (PNA's post-aggregation layer
reads 13 × hidden columns); ``hidden=None`` takes the embedding size.

Training loop, validation checkpointing, skipping and the save format are the triple
scorer's (kgrag/training/triple_scorer.py); validation recall ranks triples by s(τ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kgrag.kg.question_graph import QuestionGraph
from kgrag.training.triple_scorer import (
    GraphTensors,
    TrainedScorer,
    embedding_size,
    fit,
    load,
    textual_entities,
)


@dataclass(frozen=True)
class EntityScorerSettings:
    epochs: int
    lr: float = 1e-3
    hidden: int | None = 128    # None: the embedding size
    seed: int = 42
    layers: int = 2
    aggregators: tuple[str, ...] = ("mean", "min", "max", "std")
    scalers: tuple[str, ...] = ("identity", "amplification", "attenuation")


def train_entity_scorer(graphs: Sequence[QuestionGraph], settings: EntityScorerSettings,
                        validation: Sequence[QuestionGraph] = (),
                        progress=lambda steps, total: steps) -> TrainedScorer:
    import torch

    dim = embedding_size(graphs)
    config = {"dim": dim, "hidden": settings.hidden or dim, "settings": asdict(settings),
              "degree": degree_histogram(graphs)}
    torch.manual_seed(settings.seed)
    return fit("entity", _build(config), config, graphs, settings, validation, progress)


def load_entity_scorer(folder: Path) -> TrainedScorer:
    return load(folder, "entity", _build)


def degree_histogram(graphs: Sequence[QuestionGraph]) -> list[int]:
    """How many entities have each in-degree, over the graphs' edges in both directions."""
    import torch
    from torch_geometric.data import Data
    from torch_geometric.nn import PNAConv

    return PNAConv.get_degree_histogram(
        [Data(edge_index=_edges(torch.as_tensor(g.head), torch.as_tensor(g.tail)),
              num_nodes=len(g.entities)) for g in graphs]).tolist()


def _edges(head, tail):
    import torch

    return torch.stack([torch.cat([head, tail]), torch.cat([tail, head])])


def _build(config: dict) -> EntityScorer:
    settings = config["settings"]
    return EntityScorer(config["dim"], config["hidden"], settings["layers"],
                        settings["aggregators"], settings["scalers"], config["degree"])


class EntityScorer:
    """The PNA entity scorer; its weights are ``net``, a torch ModuleDict."""

    def __init__(self, dim: int, hidden: int, layers: int, aggregators, scalers, degree):
        import torch
        from torch_geometric.nn import PNAConv

        self.dim = dim
        histogram = torch.tensor(degree, dtype=torch.long)
        self.net = torch.nn.ModuleDict({
            "textless": torch.nn.Embedding(1, dim),
            "encode": torch.nn.Linear(2 * dim + 2, hidden),
            "relation": torch.nn.Linear(2 * dim, hidden),
            "direction": torch.nn.Embedding(2, hidden),
            "layers": torch.nn.ModuleList(
                PNAConv(hidden, hidden, list(aggregators), list(scalers), histogram,
                        edge_dim=hidden) for _ in range(layers)),
            "hidden": torch.nn.Linear(hidden, hidden),
            "out": torch.nn.Linear(hidden, 1)})

    def inputs(self, graph: QuestionGraph) -> GraphTensors:
        import torch

        inputs = GraphTensors(graph, self.dim)
        inputs.edges = _edges(inputs.head, inputs.tail)
        inputs.edge_relation = torch.cat([inputs.relation, inputs.relation])
        inputs.direction = torch.cat([torch.zeros_like(inputs.relation),
                                      torch.ones_like(inputs.relation)])
        inputs.topic_one_hot = torch.zeros(len(inputs.entities), 2)
        inputs.topic_one_hot[:, 0] = 1.0
        inputs.topic_one_hot[torch.as_tensor(graph.topic, dtype=torch.long)] = (
            torch.tensor([0.0, 1.0]))
        if inputs.labels is not None:
            positive = inputs.labels > 0
            inputs.entity_labels = torch.zeros(len(inputs.entities))
            inputs.entity_labels[inputs.head[positive]] = 1.0
            inputs.entity_labels[inputs.tail[positive]] = 1.0
        return inputs

    def logits(self, inputs: GraphTensors):
        """One logit per entity."""
        import torch

        net = self.net
        question = inputs.question.expand(len(inputs.entities), -1)
        x = torch.relu(net["encode"](torch.cat(
            [textual_entities(inputs, net["textless"]), question, inputs.topic_one_hot], dim=1)))
        relations = torch.relu(net["relation"](torch.cat(
            [inputs.relations, inputs.question.expand(len(inputs.relations), -1)], dim=1)))
        edges = relations[inputs.edge_relation] + net["direction"](inputs.direction)
        layers = net["layers"]
        assert isinstance(layers, torch.nn.ModuleList)
        for layer in layers:
            x = x + torch.relu(layer(x, inputs.edges, edges))
        return net["out"](torch.relu(net["hidden"](x))).squeeze(-1)

    def loss(self, inputs: GraphTensors):
        import torch.nn.functional as F

        return F.binary_cross_entropy_with_logits(self.logits(inputs), inputs.entity_labels)

    def triple_scores(self, inputs: GraphTensors):
        import torch

        p = torch.sigmoid(self.logits(inputs))
        return p[inputs.head] + p[inputs.tail]
