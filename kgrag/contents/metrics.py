"""The ``evaluate`` artefact: ``metrics.json``, one row per strategy and per graph build.

The step publishes it to the run folder too (``publish``), where the API reads it,
and a bundle ships it so that a replay can compare its own metrics with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS = "metrics.json"


def write_metrics(folder: Path, result: dict[str, Any]) -> None:
    (folder / METRICS).write_text(json.dumps(result, indent=2) + "\n")


def read_metrics(folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((folder / METRICS).read_text())
    return result
