"""The name ``kgrag.steps.step`` (the step contract) had before it moved into the steps
layer; kept while ``kgrag/pipeline/runner.py`` and ``kgrag/api.py`` import from here."""

from kgrag.steps.step import Counts, StepContext, StepKind

__all__ = ["Counts", "StepContext", "StepKind"]
