"""RAS (Jiang et al.): the multitask Graph-LLM planner-answerer, as a training method.

One training entry compiles to two steps (each fingerprinted, so a warm rerun trains
nothing):

``subq.<name>``       HotpotQA-SUBQ (``kgrag.training.subq``, Algorithm 1) on the split's
                      training questions, at most ``max_questions``: the closed-book check
                      and one sub-query per supporting document by the spec's LLM (at most
                      1 + documents calls per question, cached), text-to-triples with the
                      spec's extraction; planning and answering samples with their label
                      shares (Table 4's shape). A ``heldback`` share of these questions
                      trains nothing: their planning samples measure planner accuracy.
``graph_llm.<name>``  ``kgrag.training.graph_llm.train.train_graph_llm`` on the other samples,
                      over the spec's LLM (its GGUF) and embedder; the artefact is the
                      Graph-LLM folder a ``ras`` strategy names (``graph_llm``). The step
                      then scores the trained planner and the few-shot planner (the spec's
                      LLM under the plan grammar) on the held-back planning samples.
"""

from __future__ import annotations

from kgrag.declarations import Config, Param, Steps, TrainingMethod, step_name
from kgrag.limits import COUNT_MAX, PLAIN_TEXT, ROUNDS_MAX, SEED_MAX, TOKENS_MAX, WIDTH_MAX
from kgrag.training.split import SPLIT_PARAMS, split_of

SETTINGS = ("layers", "encoder_hidden", "heads", "dropout", "lora_r", "lora_alpha", "lora_dropout",
            "learning_rate", "llm_epochs", "llm_batch_size", "grad_accumulation", "warmup_ratio",
            "weight_decay", "clip", "seed", "max_input_tokens", "max_target_tokens")


def build(plan: Steps, name: str, cfg: Config, env) -> str:
    """Add one RAS entry's steps; return the step that holds the Graph-LLM."""
    data = plan.add(step_name("subq", name), "ras_subq", {
        "llm": env.scorer, "extraction": env.extraction, "split": split_of(cfg),
        "prompt": env.prompt,
        **{k: cfg[k] for k in ("max_questions", "heldback")}},
        {"corpus": "corpus"})
    trained = plan.add(step_name("graph_llm", name), "ras_graph_llm", {
        "llm": env.scorer, "embedder": env.base_embedder(cfg["embedder"]),
        "prompt": env.prompt, "settings": {k.removeprefix("llm_").removeprefix("encoder_"): cfg[k]
                                       for k in SETTINGS}},
        {"subq": data.name})
    return trained.name


LAYERS = {"type": "integer", "minimum": 1, "maximum": ROUNDS_MAX}
WIDTH = {"type": "integer", "minimum": 1, "maximum": WIDTH_MAX}
TOKENS = {"type": "integer", "minimum": 1, "maximum": TOKENS_MAX}
RATE = {"type": "number", "minimum": 0, "maximum": 1}
DECLARATION = TrainingMethod("ras", "RAS: a Graph-LLM (TransformerConv graph encoder, one "
                             "projected graph token, LoRA on the spec's LLM) trained on "
                             "HotpotQA-SUBQ planning and answering samples.", (
    *SPLIT_PARAMS,
    Param("max_questions", {"type": ["integer", "null"], "minimum": 1, "maximum": COUNT_MAX},
          "build samples from at most this many of the training questions (each costs the "
          "spec's LLM 1 + supporting documents calls); null: all of them.", default=None),
    Param("heldback", {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
          "share of those questions whose samples are held back from training to measure "
          "planner label accuracy (trained vs few-shot).", default=0.2),
    Param("embedder", {"type": "string", "minLength": 1, "pattern": PLAIN_TEXT},
          "the embedder of node and edge texts (the paper's Sentence-BERT).",
          default="all-MiniLM-L6-v2"),
    Param("layers", LAYERS, "Graph Transformer (TransformerConv) layers.", default=3),
    Param("encoder_hidden", WIDTH, "graph encoder width (authors: 1024).", default=256),
    Param("heads", WIDTH, "attention heads per layer.", default=8),
    Param("dropout", RATE, "graph encoder dropout.", default=0.1),
    Param("lora_r", WIDTH, "LoRA rank (on q_proj, v_proj).", default=8),
    Param("lora_alpha", WIDTH, "LoRA α.", default=16),
    Param("lora_dropout", RATE, "LoRA dropout.", default=0.05),
    Param("learning_rate", {"type": "number", "exclusiveMinimum": 0}, "peak learning rate "
          "(cosine schedule with warm-up).", default=1e-4),
    Param("llm_epochs", LAYERS, "epochs over the samples.", default=2),
    Param("llm_batch_size", WIDTH, "samples per batch.", default=2),
    Param("grad_accumulation", WIDTH, "batches per optimiser step.", default=2),
    Param("warmup_ratio", RATE, "share of the steps warming up.", default=0.15),
    Param("weight_decay", {"type": "number", "minimum": 0}, "AdamW weight decay.",
          default=0.01),
    Param("clip", {"type": "number", "exclusiveMinimum": 0}, "gradient norm clip.",
          default=0.5),
    Param("seed", {"type": "integer", "minimum": 0, "maximum": SEED_MAX}, "seed of shuffling and torch.", default=0),
    Param("max_input_tokens", TOKENS, "prompt tokens kept (the start is cut).",
          default=1024),
    Param("max_target_tokens", TOKENS, "label tokens kept.", default=128)),
    build, "ras_graph_llm", trains="graph_llm")
