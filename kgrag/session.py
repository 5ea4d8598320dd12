"""A session: a spec loaded and checked, its models resolved by role and its plan compiled,
before any work is done. Every command of ``kgrag.api`` starts from one; tests hand
``open_session`` a stand-in LLM backend instead of patching.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kgrag.graphs.extraction.methods import EXTRACTION_METHODS, PIPELINE
from kgrag.models import Models
from kgrag.models.backend import LLMBackend
from kgrag.models.cache import CallCache
from kgrag.models.executor import LocalExecutor, executor_of
from kgrag.pipeline.artefacts import artefact_dir
from kgrag.pipeline.compile import compile_plan
from kgrag.pipeline.integrity import damage
from kgrag.pipeline.plan import Plan, Step
from kgrag.spec import Spec, load_spec
from kgrag.training import TRAINING_METHODS

Echo = Callable[[str], None]


@dataclass(frozen=True)
class Session:
    """A loaded spec with its cache, models and compiled plan."""

    spec: Spec
    cache: CallCache
    models: Models
    plan: Plan

    @property
    def run_dir(self) -> Path:
        return self.spec.output_dir

    def artefact(self, step_name: str) -> Path:
        return artefact_dir(self.run_dir, step_name, self.plan.by_name()[step_name].fingerprint)


def open_session(spec_path: str | Path, *, root: Path | None = None,
                 cache: CallCache | None = None,
                 llm_backend: LLMBackend | None = None) -> Session:
    """Load and validate a spec, resolve its models and compile its plan (no work is done).
    ``root`` and ``cache`` replace the project the outputs go under and the spec's call
    cache (a replay runs in its own folder on the bundle's calls); ``llm_backend``
    replaces llama.cpp behind the call cache for every LLM (a stand-in in tests)."""
    spec = load_spec(spec_path, root)
    cache = CallCache(spec.cache_dir) if cache is None else cache
    models = spec_models(spec, cache, llm_backend)
    return Session(spec, cache, models, compile_plan(spec, models))


def spec_models(spec: Spec, cache: CallCache, llm_backend: LLMBackend | None = None, *,
                strict: bool = True) -> Models:
    """The models of ``spec`` by role (``kgrag.models.Models``; ``strict``: one error for
    every model that does not resolve, else each raises when asked for)."""
    parses = PIPELINE in EXTRACTION_METHODS[spec.extraction["method"]].params
    # a replay (sealed cache) makes no model call: it needs no cluster, wherever it runs
    executor = LocalExecutor() if cache.sealed else executor_of(spec.executor)
    return Models(spec.models, cache, spec.path.parent, spec.extraction["model"],
                  spec.extraction["pipeline"] if parses else None, llm_backend=llm_backend,
                  executor=executor, strict=strict,
                  trained={entry["name"]: entry["base"] for entry in spec.training
                           if TRAINING_METHODS[entry["method"]].trains == "embedder"})


def whole(session: Session, steps: Iterable[Step]) -> frozenset[str]:
    """The names of ``steps`` whose artefacts are built and undamaged: reused by a run
    (``run_plan``'s ``whole``), a damaged one rebuilt."""
    return frozenset(step.name for step in steps
                     if (artefact := session.artefact(step.name)).exists()
                     and damage(artefact) is None)
