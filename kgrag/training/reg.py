"""ReG (Zou et al.): graph retrievers trained on LLM-refined supervision.

Two methods, one per retriever: ``reg_triple`` trains SubgraphRAG's triple scorer (DDE +
MLP, ``triple_scorer``), ``reg_entity`` a PNA entity scorer (``entity_scorer``). An entry
compiles to these steps, shared by fingerprint between entries that agree on them (so a
weak and a refined entry, or a triple and an entity entry, supervise once):

``supervise.<name>``  the split, each training question's weak labels (shortest paths
                      topic ↔ answer) and merged candidate pool (``supervision``);
``refine.<name>``     the LLM's choice among the candidates (``refinement``), for the
                      first ``refine_questions`` supervised questions (labels: refined);
``train.<name>``      the retriever trained on the weak, the refined or the gold positives;
                      its model and loss curve are the artefact a ``reg`` strategy reads.

``labels: gold`` is the oracle row: the same supervised questions, the same training, with
each question's gold triples (the corpus's supporting triples) as its positives, so the gap
between it and a weak or refined row is what the labels cost, and a gold row that does not
beat an untrained baseline points at the training machinery instead.

All read the ``kg`` artefact (the embedded graph and every question's retrieval graph).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgrag.declarations import Config, Param, Steps, TrainingMethod, step_name
from kgrag.limits import COUNT_MAX, ROUNDS_MAX, SEED_MAX, WIDTH_MAX
from kgrag.training.split import SPLIT_PARAMS, split_of


def _build(level: str):
    def build(plan: Steps, name: str, cfg: Config, env) -> str:
        supervise = plan.shared(step_name("supervise", name), "reg_supervise",
                                {"split": split_of(cfg), "max_questions": cfg["max_questions"]},
                                {"corpus": "corpus", "kg": "kg"})
        inputs = {"corpus": "corpus", "kg": "kg", "supervise": supervise.name}
        if cfg["labels"] == "refined":
            refine = plan.shared(step_name("refine", name), "reg_refine", {
                "refiner": env.llm_work, "refine_questions": cfg["refine_questions"],
                "max_paths": cfg["max_paths"]}, inputs)
            inputs = {**inputs, "refine": refine.name}
        train: Config = {"level": level, "labels": cfg["labels"],
                         "epochs": cfg["training_epochs"],
                         **{k: cfg[k] for k in ("learning_rate", "hidden", "seed", "validation",
                                                "match_features") if k in cfg}}
        return plan.shared(step_name("train", name), "reg_train", train, inputs).name
    return build


def load_scorer(level: str, folder: Path) -> Any:
    """The trained retriever in a ``train.<name>`` step's artefact folder (what a ``reg``
    strategy reads), of ``level`` "triple" or "entity"."""
    from kgrag.contents.training import model_dir
    from kgrag.training.entity_scorer import load_entity_scorer
    from kgrag.training.triple_scorer import load_triple_scorer

    load = load_triple_scorer if level == "triple" else load_entity_scorer
    return load(model_dir(folder))


COMMON = (
    *SPLIT_PARAMS,
    Param("max_questions", {"type": ["integer", "null"], "minimum": 1, "maximum": COUNT_MAX},
          "train on at most this many of the training questions (a sample, for quick "
          "runs); null: all of them.", default=None),
    Param("labels", {"enum": ["weak", "refined", "gold"]},
          "the positives trained on: weak (triples on the shortest topic-answer paths), "
          "refined (the triples of the candidate paths the LLM selects; weak where it "
          "selects nothing parseable or the question is beyond refine_questions) or gold "
          "(the oracle row: each supervised question's gold triples; a question without "
          "gold triples is skipped and counted, and none with any is an error).",
          default="refined"),
    Param("refine_questions", {"type": "integer", "minimum": 1, "maximum": COUNT_MAX},
          "refine at most this many supervised questions (the first, in corpus order): one "
          "LLM call each, the slow part on a CPU.", default=40),
    Param("max_paths", {"type": "integer", "minimum": 1, "maximum": 50},
          "candidate paths shown to the LLM per question (shortest paths first, then the "
          "topic and answer neighbourhoods).", default=8),
    Param("learning_rate", {"type": "number", "exclusiveMinimum": 0}, "Adam learning rate.",
          default=1e-3),
    Param("validation", {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
          "share of the supervised questions kept for checkpoint selection (recall@100 of "
          "their positives, by epoch); 0: the last epoch's weights, as ReG trains a fixed "
          "number of epochs (on small retrieval graphs recall@100 saturates within an "
          "epoch or two, so selecting on it keeps an undertrained model).", default=0.0),
    Param("seed", {"type": "integer", "minimum": 0, "maximum": SEED_MAX}, "seed of initialisation and shuffling.",
          default=42),
    Param("training_epochs", {"type": "integer", "minimum": 1, "maximum": ROUNDS_MAX}, "training epochs (ReG: 80).",
          default=80),
)

TRIPLE = TrainingMethod("reg_triple", "ReG@Triple: SubgraphRAG's triple scorer (directional "
                        "distance encoding + MLP) trained by BCE on weak, LLM-refined or "
                        "gold triple labels of KGQA questions.", (
    *COMMON,
    Param("hidden", {"type": ["integer", "null"], "minimum": 1, "maximum": WIDTH_MAX},
          "hidden width; null: the embedding size (SubgraphRAG's MLP).", default=None),
    Param("match_features", {"type": "boolean"},
          "add the question's cosine to each triple's text, relation, head and tail "
          "(standardised within the graph) to the MLP's input and as a linear term of its "
          "score. The published MLP sees the question only additively and, trained on a few "
          "hundred questions, ranks below untrained cosine even on gold labels; false: "
          "SubgraphRAG's scorer as published.", default=True)),
    _build("triple"), "reg_train", trains="triple_scorer", evidence="triples")

ENTITY = TrainingMethod("reg_entity", "ReG@Entity: a PNA GNN (torch-geometric) scoring "
                        "entities, trained by BCE on the entities of weak, LLM-refined or "
                        "gold triple labels; a triple scores p(head) + p(tail).", (
    *COMMON,
    Param("hidden", {"type": ["integer", "null"], "minimum": 1, "maximum": WIDTH_MAX},
          "hidden width of the PNA layers; null: the embedding size.", default=None)),
    _build("entity"), "reg_train", trains="entity_scorer", evidence="triples")
