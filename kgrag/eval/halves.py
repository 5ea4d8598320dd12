"""The dev and test halves of a question set: tune on one, report the other.

A default chosen on the questions it is reported on is not a result. Each shared
sample is therefore split by question, seeded: the dev half is the first half of the
questions ranked by a seeded hash of their ids (the ranking the training split uses),
the test half the rest. A question's half depends on its id, the seed and the number
of questions, never on file order, so every row of every run agrees on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from kgrag.errors import KgragError

HALVES = ("dev", "test")


def seeded_share(question_ids: Iterable[str], fraction: float, seed: int) -> set[str]:
    """The first ``round(fraction · n)`` of the distinct ids ranked by a seeded hash of
    each: what every split by question cuts (these halves, a training method's
    ``kgrag.training.split``)."""
    ranked = sorted(set(question_ids),
                    key=lambda qid: hashlib.sha256(f"{seed}\0{qid}".encode()).hexdigest())
    return set(ranked[:round(fraction * len(ranked))])


def halves(question_ids: Iterable[str], seed: int = 0) -> dict[str, set[str]]:
    """``{"dev": ids, "test": ids}``: the seeded split of ``question_ids`` in two."""
    ids = set(question_ids)
    if len(ids) < 2:
        raise KgragError(f"a sample of {len(ids)} question(s) is too small to split into a "
                         "dev half and a test half; it needs at least 2")
    dev = seeded_share(ids, 0.5, seed)
    return {"dev": dev, "test": ids - dev}
