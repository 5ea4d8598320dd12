"""Which differences between a replay's metrics and the bundle's are expected.

Timings are measured anew on every run (``TIMING``). A build row also says what building
cost when it was built: the original paid model calls that the replay's cache answered,
so its ``llm_calls`` and ``cache_hits`` differ by nature (``PAID``); everything else in
``metrics.json`` (every score, token count, request count) must be identical.
"""

from __future__ import annotations

from typing import Any

TIMING = ("retrieval_ms_p50", "retrieval_ms_p95", "retrieval_llm_ms_p50", "wall_s",
          "chunks_per_min")
PAID = ("llm_calls", "cache_hits")


def metric_differences(bundled: dict[str, Any], replayed: dict[str, Any]) -> list[str]:
    """``where: bundled → replayed`` for every difference that is not expected."""
    differences = [f"{key}: {bundled.get(key)!r} → {replayed.get(key)!r}"
                   for key in ("dataset", "n_questions") if bundled.get(key) != replayed.get(key)]
    for table, label, skip in (("rows", "strategy", TIMING), ("builds", "graph", TIMING + PAID)):
        before, after = bundled.get(table, []), replayed.get(table, [])
        if [row[label] for row in before] != [row[label] for row in after]:
            differences.append(f"{table}: {[r[label] for r in before]} → "
                               f"{[r[label] for r in after]}")
            continue
        for old, new in zip(before, after):
            for key in sorted(set(old) | set(new)):
                if key not in skip and old.get(key) != new.get(key):
                    differences.append(f"{table} {old[label]}.{key}: {old.get(key)!r} → "
                                       f"{new.get(key)!r}")
    return differences
