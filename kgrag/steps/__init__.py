"""Step kinds. Each module adapts library functions to the runner's uniform
``run(ctx)`` signature (``kgrag.steps.step``); the methods themselves live elsewhere.
``KINDS`` lists every kind a plan may use, explicitly."""

from kgrag.steps import (
    answer,
    bipartite,
    chunks,
    corpus,
    dense,
    evaluate,
    hierarchy,
    kg,
    ras_train,
    reg,
    retrieve,
    skeleton,
    train,
)
from kgrag.steps.step import StepKind

KINDS: dict[str, StepKind] = {kind.name: kind for kind in (
    corpus.import_corpus, chunks.chunk, dense.dense_index,
    skeleton.core, skeleton.extract_core, skeleton.skeleton, bipartite.bipartite,
    hierarchy.build_hierarchy, hierarchy.summarise, hierarchy.gates,
    train.ark_align, train.ark_augment, train.ark_stage,
    kg.kg_index, reg.reg_supervise, reg.reg_refine, reg.reg_train,
    ras_train.ras_subq, ras_train.ras_graph_llm,
    retrieve.retrieve, answer.answer_questions, answer.answer_from_trace, evaluate.evaluate)}
