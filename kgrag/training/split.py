"""The split by question: which questions a retriever trains on and which stay held out.

Questions are ranked by a seeded hash of their id, and the first ``fraction`` of them
train. A question's side depends on its id, the seed and how many questions there are,
never on file order, so a training step and every evaluating step agree on it without
reading each other's artefacts, and no evaluated question was ever trained on.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgrag.declarations import Param
from kgrag.eval.halves import seeded_share
from kgrag.limits import SEED_MAX

SPLIT_PARAMS = (
    Param("train_fraction", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
          "share of the corpus's questions that train (by a seeded hash of their ids); "
          "every retrieve step of the spec skips them, so no evaluated question was "
          "trained on.", default=0.5),
    Param("split_seed", {"type": "integer", "minimum": 0, "maximum": SEED_MAX}, "seed of the split.", default=0),
)
"""Every training method's split: what ``split_of`` reads."""


def training_questions(question_ids: Iterable[str], fraction: float, seed: int) -> set[str]:
    """The ids that train: the first ``round(fraction · n)`` by seeded hash."""
    return seeded_share(question_ids, fraction, seed)


def split_of(entry: dict) -> dict:
    """A training entry's split, as steps record it."""
    return {"fraction": entry["train_fraction"], "seed": entry["split_seed"]}


def held_out(question_ids: Iterable[str], splits: Iterable[dict]) -> list[str]:
    """The ids of ``question_ids`` that no split trains on, in their order."""
    ids = list(question_ids)
    trained: set[str] = set()
    for split in splits:
        trained |= training_questions(ids, split["fraction"], split["seed"])
    return [qid for qid in ids if qid not in trained]
