"""ReG@Triple's retriever: SubgraphRAG's triple scorer (Li et al. 2024), Directional Distance
Encoding (DDE) followed by an MLP, trained by binary cross-entropy over every triple of a
question graph (ReG Eq. 33), on the CPU over precomputed text embeddings.

Each entity's positional encoding is its topic one-hot (2 columns, as SubgraphRAG's code:
``[not topic, topic]``) followed by the DDE features: the one-hot propagated by
parameter-free mean aggregation over incoming edges for 2 rounds along the triples' direction
(head → tail) and 2 rounds against it, every round's result concatenated (10 columns in
all). An entity without text shares one learned embedding. Triple τ = (h, r, t) is scored by
Linear(in → d) → ReLU → Linear(d → 1) over concat[q, h ⊕ PE(h), r, t ⊕ PE(t)], d the
embedding size by default. The first layer is evaluated block by block (question once,
entities and relations once each, then gathered per triple): the same function as the
concatenation, without materialising an (n_t, 4d + 20) input.

Match features (``match``, on by default; off is SubgraphRAG's scorer as published): the
question's cosine to the triple's text, to its relation, and to its head and tail (0 for a
textless entity), each standardised over the graph's triples, join the first layer's input
and reach the logit through a linear term too. The linear term starts as the triple-text
cosine (weight 1 on it, 0 on the rest), so training starts near the untrained baseline's
ranking. The published MLP sees the question only additively (its first layer is a sum of
a question term and a triple term), so the match between the two must be learnt through
the ReLU from the training questions alone: trained on the gold labels of 269 WebQSP
questions it ranked below untrained cosine at recall@5 (0.596 against 0.639 on padded
graphs). With the match features it starts from what cosine knows and learns what the
graph and the labels add (0.722; docs/results.md, ReG).

Training (shared with the entity scorer, kgrag/training/entity_scorer.py): Adam, one question
graph per step, graphs shuffled each epoch by a seeded generator after seeded
initialisation, so the same graphs and seed give the same losses on one machine. Graphs
without a positive label are skipped and counted. With validation graphs, the kept weights
are those of the epoch with the best mean recall@100 of positive triples over the
validation graphs that have one (first such epoch on ties); without, the last epoch's.
ReG trains a fixed number of epochs and keeps the best validation checkpoint; so does this.

Saved as ``scorer.json`` (kind, sizes, settings and the training report) beside
``scorer.pt`` (the state dict), loadable without the training data.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.kg.question_graph import QuestionGraph

if TYPE_CHECKING:
    import torch

RECALL_AT = 100
DDE_ROUNDS = 2
DDE_REVERSE_ROUNDS = 2
PE_SIZE = 2 * (1 + DDE_ROUNDS + DDE_REVERSE_ROUNDS)
MATCH_SIZE = 4  # cosine of the question to the triple text, relation, head and tail
CONFIG, WEIGHTS = "scorer.json", "scorer.pt"


@dataclass(frozen=True)
class ScorerSettings:
    epochs: int
    lr: float = 1e-3
    hidden: int | None = None   # None: the embedding size
    seed: int = 42
    match: bool = True          # the match features (module docstring); False: as published


class TrainedScorer:
    """A trained graph retriever: ``scores(graph)`` gives one relevance score per triple
    (higher = more relevant); ``report`` holds the training record (losses, mean loss per
    epoch; validation_recall per epoch; best_epoch, 1-based; epochs_run; skipped, the
    training graphs without a positive label; questions trained on; parameters)."""

    def __init__(self, kind: str, module, config: dict, report: dict):
        self.kind, self.module, self.config, self.report = kind, module, config, report
        module.net.eval()

    @property
    def losses(self) -> list[float]:
        return self.report["losses"]

    @property
    def best_epoch(self) -> int:
        return self.report["best_epoch"]

    def scores(self, graph: QuestionGraph) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.module.triple_scores(self.module.inputs(graph)).numpy()

    def save(self, folder: Path) -> None:
        import torch

        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.module.net.state_dict(), folder / WEIGHTS)
        (folder / CONFIG).write_text(json.dumps(
            {"kind": self.kind, **self.config, "report": self.report}, indent=1))


def train_triple_scorer(graphs: Sequence[QuestionGraph], settings: ScorerSettings,
                        validation: Sequence[QuestionGraph] = (),
                        progress=lambda steps, total: steps) -> TrainedScorer:
    import torch

    dim = embedding_size(graphs)
    config: dict[str, Any] = {"dim": dim, "hidden": settings.hidden or dim,
                              "settings": asdict(settings)}
    torch.manual_seed(settings.seed)
    module = TripleScorer(dim, config["hidden"], settings.match)
    return fit("triple", module, config, graphs, settings, validation, progress)


def load_triple_scorer(folder: Path) -> TrainedScorer:
    return load(folder, "triple", lambda c: TripleScorer(
        c["dim"], c["hidden"], c["settings"]["match"]))


def dde(topic: np.ndarray | Sequence[int], head, tail, entities: int):
    """The topic one-hot and its DDE rounds, (entities, PE_SIZE): a tensor."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.utils import scatter

    head, tail = torch.as_tensor(head, dtype=torch.long), torch.as_tensor(tail, dtype=torch.long)
    mask = torch.zeros(entities, dtype=torch.long)
    mask[torch.as_tensor(topic, dtype=torch.long)] = 1
    one_hot = F.one_hot(mask, 2).float()
    rounds = [one_hot]
    for source, target, count in ((head, tail, DDE_ROUNDS), (tail, head, DDE_REVERSE_ROUNDS)):
        x = one_hot
        for _ in range(count):
            x = scatter(x[source], target, dim=0, dim_size=entities, reduce="mean")
            rounds.append(x)
    return torch.cat(rounds, dim=1)


class GraphTensors:
    """One question graph as tensors (what both scorers read), built once per graph."""

    # What a scorer's ``inputs`` adds for itself: the triple scorer's DDE rounds (``pe``)
    # and match features, the entity scorer's message-passing edges and entity labels.
    pe: torch.Tensor
    match: torch.Tensor
    edges: torch.Tensor
    edge_relation: torch.Tensor
    direction: torch.Tensor
    topic_one_hot: torch.Tensor
    entity_labels: torch.Tensor

    def __init__(self, graph: QuestionGraph, dim: int):
        import torch

        graph.check()
        if graph.question.shape[-1] != dim:
            raise KgragError(f"question graph embeddings have size {graph.question.shape[-1]}"
                             f" but the scorer was trained on size {dim}: use the same"
                             f" embedding model for training and retrieval")
        if graph.triples == 0:
            raise KgragError("a question graph has no triples (no edges): nothing to score;"
                             " leave such questions out before scoring")
        self.question = torch.from_numpy(np.asarray(graph.question, dtype=np.float32))
        self.entities = torch.from_numpy(np.asarray(graph.entities, dtype=np.float32))
        self.textless = torch.from_numpy(np.asarray(graph.textless, dtype=bool))
        self.relations = torch.from_numpy(np.asarray(graph.relations, dtype=np.float32))
        self.head, self.relation, self.tail = (
            torch.from_numpy(np.asarray(a, dtype=np.int64))
            for a in (graph.head, graph.relation, graph.tail))
        self.topic = graph.topic
        self.labels = (None if graph.labels is None
                       else torch.from_numpy(np.asarray(graph.labels, dtype=np.float32)))
        self.similarity = (None if graph.similarity is None
                           else torch.from_numpy(np.asarray(graph.similarity, dtype=np.float32)))


def textual_entities(inputs: GraphTensors, shared):
    """Entity embeddings with every textless entity's replaced by the shared one."""
    import torch

    return torch.where(inputs.textless[:, None], shared.weight.expand_as(inputs.entities),
                       inputs.entities)


class TripleScorer:
    """The DDE + MLP scorer, with or without the match features; its weights are ``net``,
    a torch ModuleDict."""

    def __init__(self, dim: int, hidden: int, match: bool):
        import torch

        self.dim, self.match = dim, match
        extra = MATCH_SIZE if match else 0
        self.net = torch.nn.ModuleDict({
            "textless": torch.nn.Embedding(1, dim),
            "first": torch.nn.Linear(4 * dim + 2 * PE_SIZE + extra, hidden),
            "second": torch.nn.Linear(hidden, 1)})
        if match:  # starts as the triple-text cosine, so untrained it ranks as cosine does
            self.net["match"] = match_layer = torch.nn.Linear(MATCH_SIZE, 1)
            with torch.no_grad():
                match_layer.weight.copy_(torch.eye(1, MATCH_SIZE))
                match_layer.bias.zero_()

    def inputs(self, graph: QuestionGraph) -> GraphTensors:
        inputs = GraphTensors(graph, self.dim)
        if self.match and graph.similarity is None:
            raise KgragError("the triple scorer reads each triple's cosine to the question"
                             " (its match features), but the question graph has none")
        inputs.pe = dde(inputs.topic, inputs.head, inputs.tail, len(inputs.entities))
        if self.match:
            inputs.match = match_features(inputs)
        return inputs

    def logits(self, inputs: GraphTensors):
        import torch

        d, first, textless = self.dim, self.net["first"], self.net["textless"]
        assert isinstance(first, torch.nn.Linear) and isinstance(textless, torch.nn.Embedding)
        sizes = [d, d + PE_SIZE, d, d + PE_SIZE] + ([MATCH_SIZE] if self.match else [])
        wq, wh, wr, wt, *wm = first.weight.split(sizes, dim=1)
        ends_text = torch.cat([wh[:, :d], wt[:, :d]])  # head and tail columns, stacked
        ends_pe = torch.cat([wh[:, d:], wt[:, d:]])
        ends = (torch.where(inputs.textless[:, None],
                            textless.weight @ ends_text.T,
                            inputs.entities @ ends_text.T)
                + inputs.pe @ ends_pe.T)
        head, tail = ends.split(first.out_features, dim=1)
        hidden = (inputs.question @ wq.T + first.bias
                  + head.index_select(0, inputs.head)
                  + (inputs.relations @ wr.T).index_select(0, inputs.relation)
                  + tail.index_select(0, inputs.tail))
        if not self.match:
            return self.net["second"](torch.relu(hidden)).squeeze(-1)
        hidden = hidden + inputs.match @ wm[0].T
        return (self.net["second"](torch.relu(hidden))
                + self.net["match"](inputs.match)).squeeze(-1)

    def loss(self, inputs: GraphTensors):
        import torch.nn.functional as F

        assert inputs.labels is not None, "fit trains on labelled graphs only"
        return F.binary_cross_entropy_with_logits(self.logits(inputs), inputs.labels)

    def triple_scores(self, inputs: GraphTensors):
        return self.logits(inputs)


def match_features(inputs: GraphTensors):
    """(n_t, MATCH_SIZE): the question's cosine to each triple's text, relation, head and
    tail (0 for a textless end), each column standardised over the graph's triples (a
    constant column becomes 0)."""
    import torch

    assert inputs.similarity is not None, "the scorer's inputs checked it"
    ends = torch.where(inputs.textless, 0.0, inputs.entities @ inputs.question)
    columns = torch.stack([inputs.similarity,
                           (inputs.relations @ inputs.question)[inputs.relation],
                           ends[inputs.head], ends[inputs.tail]], dim=1)
    spread = columns.std(dim=0, unbiased=False)
    return (columns - columns.mean(dim=0)) / torch.where(spread > 1e-6, spread, 1.0)


def fit(kind: str, module, config: dict, graphs: Sequence[QuestionGraph], settings,
        validation: Sequence[QuestionGraph], progress) -> TrainedScorer:
    """The training loop both scorers share (see the module docstring)."""
    import torch

    train = [module.inputs(g) for g in graphs if g.labels is not None and g.labels.any()]
    if not train:
        raise KgragError("no training question graph has a positive triple label:"
                         " nothing to train the retriever on")
    checks = [(module.inputs(g), g.labels > 0) for g in validation
              if g.labels is not None and g.labels.any()]
    optimiser = torch.optim.Adam(module.net.parameters(), lr=settings.lr)
    shuffle = random.Random(settings.seed)
    order = list(range(len(train)))
    losses: list[float] = []
    recalls: list[float] = []
    best, best_state = 0, None
    for epoch in progress(range(settings.epochs), settings.epochs):
        shuffle.shuffle(order)
        module.net.train()
        total = 0.0
        for i in order:
            loss = module.loss(train[i])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach())
        losses.append(total / len(train))
        if checks:
            module.net.eval()
            with torch.no_grad():
                recalls.append(float(np.mean([
                    recall_at(module.triple_scores(inputs).numpy(), positive, RECALL_AT)
                    for inputs, positive in checks])))
            if best_state is None or recalls[-1] > recalls[best - 1]:
                best = epoch + 1
                best_state = {k: v.clone() for k, v in module.net.state_dict().items()}
    if best_state is not None:
        module.net.load_state_dict(best_state)
    report = {"losses": losses, "validation_recall": recalls, "recall_at": RECALL_AT,
              "best_epoch": best or settings.epochs, "epochs_run": settings.epochs,
              "questions": len(train), "skipped": len(graphs) - len(train),
              "validation_questions": len(checks),
              "parameters": sum(p.numel() for p in module.net.parameters())}
    return TrainedScorer(kind, module, config, report)


def recall_at(scores: np.ndarray, positive: np.ndarray, k: int) -> float:
    """Share of the positive triples among the k best-scored (ties broken by index)."""
    top = np.argsort(-scores, kind="stable")[:k]
    return float(positive[top].sum() / positive.sum())


def load(folder: Path, kind: str, build: Callable[[dict[str, Any]], Any]) -> TrainedScorer:
    import torch

    if not (folder / CONFIG).is_file() or not (folder / WEIGHTS).is_file():
        raise KgragError(f"{folder} holds no trained retriever ({CONFIG} and {WEIGHTS}):"
                         f" run the training step first")
    config = json.loads((folder / CONFIG).read_text())
    if config.get("kind") != kind:
        raise KgragError(f"{folder} holds a {config.get('kind')} scorer, not a {kind} scorer")
    report = config.pop("report")
    config.pop("kind")
    module = build(config)
    module.net.load_state_dict(torch.load(folder / WEIGHTS, weights_only=True))
    return TrainedScorer(kind, module, config, report)


def embedding_size(graphs: Sequence[QuestionGraph]) -> int:
    if not graphs:
        raise KgragError("no training question graphs: nothing to train the retriever on")
    return int(graphs[0].question.shape[-1])
