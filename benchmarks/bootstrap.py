"""The percentile bootstrap the benchmarks report their means with."""

from __future__ import annotations

import numpy as np


def interval(values: np.ndarray, rounds: int, rng: np.random.Generator) -> str:
    """Mean [2.5 %, 97.5 %] of the mean over questions resampled with replacement (a
    paired interval where ``values`` are per-question differences)."""
    if len(values) == 0:
        return "–"
    means = values[rng.integers(0, len(values), (rounds, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return f"{values.mean():.3f} [{low:.3f}, {high:.3f}]"
