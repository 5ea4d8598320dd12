"""ARK (Zhou et al.): answer-centric retriever fine-tuning with a KG-augmented curriculum.

One training entry compiles to these steps (each fingerprinted, so a warm rerun trains
nothing and a changed parameter reruns only what depends on it):

``align.<name>``    the split, each training question's candidate units, the three
                    alignment scores and the top-M positives (``alignment``), or, for
                    the oracle row ``positives: gold``, the candidates from its
                    supporting documents;
``augment.<name>``  confusing questions from PPR subgraphs of the shared extraction
                    (``augmentation``), over ``extract.<name>``, the extraction on every
                    chunk (stages 2 and 3 only);
``stage1.<name>``…  the curriculum (``curriculum``): stage 1 in-batch InfoNCE on
                    (question, positive); stages 2 and 3 the same with hard negatives
                    mined for the large- and small-subgraph questions by the previous
                    stage's model. Each stage's model is its artefact, so an interrupted
                    training resumes from its last completed stage (a stage stopped
                    partway, from its last completed epoch), and an entry with
                    ``stages: 1`` or ``2`` is the ablation that reuses the longer one's.
"""

from __future__ import annotations

from collections.abc import Iterator

from kgrag.declarations import Config, Param, Problem, Steps, TrainingMethod, step_name
from kgrag.limits import COUNT_MAX, ITEMS_MAX, PLAIN_TEXT, ROUNDS_MAX, SEED_MAX, WIDTH_MAX
from kgrag.training.split import SPLIT_PARAMS, split_of

NUMBER = {"type": "number", "minimum": 0}
WINDOW = {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": COUNT_MAX},
          "minItems": 2,
          "maxItems": 2}
PER_STAGE = {"type": "array", "minItems": 3, "maxItems": 3}
GOLD = "gold"  # ``positives``: the supporting documents' chunks, not the scorer's top M


def build(plan: Steps, name: str, cfg: Config, env) -> str:
    """Add one ARK entry's steps; return the step that holds its final model. Steps are
    shared: an entry that differs from another only in later stages (the ablation
    ``stages: 1``) reuses its earlier steps, artefacts included."""
    base = env.base_embedder(cfg["base"])
    # the oracle row scores nothing: no scorer, no weights in its fingerprint
    scoring = ({} if cfg["positives"] == GOLD else
               {"scorer": env.scorer, "weights": cfg["weights"]})
    align = plan.shared(step_name("align", name), "ark_align", {
        "base": base, "split": split_of(cfg), **scoring,
        **{k: cfg[k] for k in ("max_questions", "candidates", "positives")}},
        {"corpus": "corpus", "chunks": "chunks"})
    training = {"base": base, "seed": cfg["seed"], "temperature": cfg["temperature"],
                "batch_size": cfg["batch_size"], "max_seq_length": cfg["max_seq_length"]}
    previous = plan.shared(step_name("stage1", name), "ark_stage", {
        **training, "stage": 1, "epochs": cfg["epochs"][0],
        "learning_rate": cfg["learning_rates"][0], "warmup_steps": cfg["warmup_steps"]},
        {"corpus": "corpus", "chunks": "chunks", "align": align.name})
    if cfg["stages"] == 1:
        return previous.name
    extract = plan.shared(step_name("extract", name), "extract",
                          {**env.extraction, "beta": 1.0}, {"chunks": "chunks"})
    augment = plan.shared(step_name("augment", name), "ark_augment", {
        "base": base, "augmenter": env.llm_work, "split": split_of(cfg),
        "max_questions": cfg["max_questions"],
        **({"augment_questions": cfg["augment_questions"]}
           if cfg["augment_questions"] is not None else {}),
        **{k: cfg[k] for k in ("similarity", "damping", "epsilon", "large", "small",
                               "augmented")}},
        {"corpus": "corpus", "align": align.name, "extract": extract.name})
    for stage in range(2, cfg["stages"] + 1):
        previous = plan.shared(step_name(f"stage{stage}", name), "ark_stage", {
            **training, "stage": stage, "epochs": cfg["epochs"][stage - 1],
            "learning_rate": cfg["learning_rates"][stage - 1], "warmup_steps": 0,
            "hard_negatives": cfg["hard_negatives"], "negatives": cfg["negatives"],
            "miner": previous.fingerprint},
            {"chunks": "chunks", "align": align.name, "augment": augment.name,
             "previous": previous.name})
    return previous.name


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    """A subgraph window must not be upside down; an entry cannot fine-tune itself."""
    for window in ("large", "small"):
        low, high = entry[window]
        if low > high:
            yield ("training", index, window), f"{window} is a [min, max] node window; {low} > {high}"
    if entry["base"] == entry["name"]:
        yield ("training", index, "base"), "a training entry cannot fine-tune itself"


DECLARATION = TrainingMethod("ark", "ARK: a sentence-transformers retriever fine-tuned on "
                             "LLM answer-alignment positives with a three-stage curriculum "
                             "of KG-augmented hard negatives (InfoNCE).", (
    Param("base", {"type": "string", "minLength": 1, "pattern": PLAIN_TEXT},
          "the embedder to fine-tune: a bundled name or a sentence-transformers folder.",
          default="all-MiniLM-L6-v2"),
    *SPLIT_PARAMS,
    Param("max_questions", {"type": ["integer", "null"], "minimum": 1, "maximum": COUNT_MAX},
          "train on at most this many of the training questions (a sample, for quick "
          "runs); null: all of them.", default=None),
    Param("candidates", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "units scored per question: the chunks of its supporting documents, then the "
          "base embedder's nearest chunks up to this many.", default=20),
    Param("positives", {"oneOf": [{"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
                                  {"const": GOLD}]},
          "M, the top units by alignment score that are a question's positives; 'gold': "
          "the oracle row, whose positives are the candidates from the question's "
          "supporting documents (no LLM scoring; the curriculum is unchanged), so its gap "
          "to the scored row is the scorer's share.", default=10),
    Param("weights", {"type": "object", "additionalProperties": False,
                      "required": ["forward", "backward", "parameter"],
                      "properties": {t: NUMBER for t in ("forward", "backward", "parameter")}},
          "weights of the min-max normalised alignment terms; 0 leaves a term out (the "
          "paper's Table 3 ablations) and saves its LLM calls.",
          default={"forward": 1.0, "backward": 0.3, "parameter": 1.0}),
    Param("similarity", {"type": "number", "minimum": -1, "maximum": 1},
          "entity pairs whose name embeddings have at least this cosine are joined.",
          default=0.8),
    Param("damping", {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
          "PPR damping from the question's and answer's entities.", default=0.85),
    Param("epsilon", {"type": "number", "exclusiveMinimum": 0},
          "PPR scores below this are dropped before the cut.", default=1e-4),
    Param("large", WINDOW, "node-count window [min, max] of the large subgraph's cut.",
          default=[20, 50]),
    Param("small", WINDOW, "node-count window [min, max] of the small subgraph's cut.",
          default=[3, 10]),
    Param("augment_questions", {"type": ["integer", "null"], "minimum": 1, "maximum": COUNT_MAX},
          "augment at most this many of the aligned questions (the first, in corpus "
          "order): the generation is the slow part on a CPU; null: all of them.",
          default=None),
    Param("augmented", {"type": "integer", "minimum": 1, "maximum": 20},
          "confusing questions asked for per subgraph.", default=10),
    Param("stages", {"type": "integer", "minimum": 1, "maximum": 3},
          "curriculum stages to run: 1 (in-batch negatives), 2 (+ large-subgraph hard "
          "negatives), 3 (+ small-subgraph hard negatives).", default=3),
    Param("epochs", {**PER_STAGE, "items": {"type": "integer", "minimum": 1,
                                            "maximum": ROUNDS_MAX}},
          "epochs of stages 1, 2, 3.", default=[3, 4, 3]),
    Param("learning_rates", {**PER_STAGE, "items": {"type": "number", "exclusiveMinimum": 0}},
          "AdamW learning rates of stages 1, 2, 3 (linear decay).",
          default=[1e-5, 8e-6, 4e-6]),
    Param("warmup_steps", {"type": "integer", "minimum": 0, "maximum": COUNT_MAX},
          "linear warm-up steps of stage 1.", default=50),
    Param("batch_size", {"type": "integer", "minimum": 2, "maximum": WIDTH_MAX}, "examples per step.", default=32),
    Param("temperature", {"type": "number", "exclusiveMinimum": 0},
          "InfoNCE temperature τ (the paper omits it; sentence-transformers' "
          "MultipleNegativesRankingLoss uses 0.05).", default=0.05),
    Param("hard_negatives", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "K, units the previous stage's model retrieves for each augmented question; "
          "those that are not positives are its hard negatives.", default=20),
    Param("negatives", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "hard negatives per training example, hardest first.", default=20),
    Param("max_seq_length", {"type": "integer", "minimum": 16, "maximum": 512},
          "tokens per text in training.", default=256),
    Param("seed", {"type": "integer", "minimum": 0, "maximum": SEED_MAX}, "seed of shuffling and torch.",
          default=0)), build, "ark_stage", problems=_problems)
