"""ARK's answer-alignment scoring (Sec. 3.3.1): which units suffice to answer a question.

Each candidate unit t of a question q with gold answer a gets three scores:

- forward: the mean log-probability of a given q and t (teacher forcing, Eq. 3);
- backward: the mean log-probability of q given a and t (Eq. 4);
- parameter: the cosine of q and t under the frozen base embedder (Eq. 5).

As in the authors' released code, each score is min-max normalised over the question's
candidates before the weighted sum (Eq. 6; weights 1.0 / 0.3 / 1.0), and the top M units
are the question's positives. Log-probabilities come from the spec's LLM through the
call cache, so a rerun, or a run with other weights, scores nothing again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# The forward prompt is the paper's (App. A.3, LongBench's concise-answer instruction);
# the backward one, which the paper does not give, follows the released code's "infer the
# original question". Both open with the unit, so the backward call reuses the forward
# call's evaluation of it (the unit is most of either prompt).
FORWARD = ("Context: {unit}\n\nAnswer the question based on the context above. Answer as "
           "concisely as you can, using a single phrase if possible. If the context does not "
           "contain the answer, write \"unanswerable\".\n\nQuestion: {question}\nAnswer:")
BACKWARD = ("Context: {unit}\n\nInfer the original question from the context above and its "
            "answer.\n\nAnswer: {answer}\nQuestion:")
TERMS = ("forward", "backward", "parameter")


@dataclass(frozen=True)
class Scored:
    """One question's candidates with their three raw scores and the combined one."""

    unit_ids: list[str]
    raw: dict[str, np.ndarray]
    combined: np.ndarray

    def positives(self, m: int) -> list[str]:
        """The ``m`` best units by combined score (ties by candidate order)."""
        order = np.argsort(-self.combined, kind="stable")[:m]
        return [self.unit_ids[i] for i in order]


def minmax(values: np.ndarray) -> np.ndarray:
    """Scaled to [0, 1] over the question's candidates; all equal → all 0."""
    span = float(values.max() - values.min()) if values.size else 0.0
    return np.zeros_like(values) if span == 0 else (values - values.min()) / span


def score_units(llm, question: str, answer: str, unit_ids: list[str], texts: list[str],
                cosines: np.ndarray, weights: Mapping[str, float]) -> Scored:
    """The three alignment scores of every candidate and their weighted normalised sum.
    A term of weight 0 is not computed (the ablations' rows pay nothing for it)."""
    prompts = {"forward": lambda t: (FORWARD.format(unit=t, question=question), " " + answer),
               "backward": lambda t: (BACKWARD.format(unit=t, answer=answer), " " + question)}
    terms = [term for term in prompts if weights[term]]
    # one batch: the prompts of a unit share its evaluation
    scores = llm.logprobs([prompts[term](t) for term in terms for t in texts])
    raw: dict[str, np.ndarray] = {term: np.array(scores[k * len(texts):(k + 1) * len(texts)])
                                  for k, term in enumerate(terms)}
    raw["parameter"] = np.asarray(cosines, dtype=np.float64)
    combined = sum(weights[term] * minmax(values) for term, values in raw.items())
    return Scored(unit_ids, raw, np.asarray(combined, dtype=np.float64))


def gold_units(unit_ids: list[str], cosines: np.ndarray, supporting: list[bool]) -> Scored:
    """The oracle's scores (``positives: gold``): a unit from a supporting document ranks
    above every other, the base cosine orders each side; no LLM term. Its positives are
    the supporting units, ``positives(sum(supporting))``."""
    raw = {"parameter": np.asarray(cosines, dtype=np.float64)}
    combined = np.asarray(supporting, dtype=np.float64) + minmax(raw["parameter"]) / 2
    return Scored(unit_ids, raw, combined)
