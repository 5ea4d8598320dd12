"""Execute a plan: reuse every artefact whose fingerprint exists, run the rest.

Per step the runner measures wall time, peak RSS and model usage (as the
difference of the model layers' counters), keeps the keys of the cache entries the step
used beside its artefact (what ``kgrag bundle`` ships), and rewrites the manifest after
each step so even an interrupted run documents what it completed. An artefact
whose files no longer match its listing is rebuilt rather than reused
(``kgrag.pipeline.integrity``).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from kgrag.errors import KgragError, writing
from kgrag.host import PeakRSS
from kgrag.pipeline.artefacts import (
    CALLS_RECORD,
    artefact_dir,
    atomic_dir,
    remove_stale_temps,
    run_lock,
    write_json_atomic,
)
from kgrag.pipeline.integrity import check, write_listing
from kgrag.pipeline.manifest import Manifest
from kgrag.pipeline.plan import Plan, Step
from kgrag.progress import step_label
from kgrag.steps import KINDS
from kgrag.steps.step import BUILD_RECORD, StepContext, StepKind

log = logging.getLogger(__name__)
OUTPUTS_ADVICE = ("free space there or make it writable (or set the spec's outputs to "
                  "another folder), then run again: completed steps and cached model calls "
                  "are kept")


def forced_steps(plan: Plan, force: Iterable[str]) -> set[str]:
    """Steps to rerun for ``--force``: each named step (by name or kind) and all downstream."""
    names = {s.name for s in plan.steps}
    chosen = set()
    for f in force:
        match = {s.name for s in plan.steps if f in (s.name, s.kind)}
        if not match:
            raise KgragError(f"--force {f}: no such step; steps are: {', '.join(sorted(names))}")
        chosen |= match
    for s in plan.steps:  # plan order is topological, so one pass reaches all descendants
        if chosen.intersection(s.inputs.values()):
            chosen.add(s.name)
    return chosen


def run_plan(plan: Plan, *, spec: Any, models: Any, run_dir: Path, steps: list[Step] | None = None,
             force: Iterable[str] = (), whole: Collection[str] = (),
             echo: Callable[[str], None] = print) -> Manifest:
    """Run ``steps`` (default: the whole plan) under the run folder's lock. A run folder
    that cannot take the writes (a full disk, read-only) ends the run with one message;
    the step it was writing leaves no folder behind, the completed ones stay. ``whole``
    names the steps whose artefacts the command has just found whole (``kgrag.session.
    whole``): they are reused without reading their files again."""
    todo = plan.steps if steps is None else steps
    rerun = forced_steps(plan, force)
    with writing(run_dir, "the run's outputs", OUTPUTS_ADVICE), run_lock(run_dir):
        remove_stale_temps(run_dir)
        manifest = Manifest.start(run_dir, spec, models, todo)
        for step in todo:
            manifest.record(_run_step(step, plan, spec, models, run_dir, step.name in rerun,
                                      step.name in whole, echo))
            manifest.write()
        manifest.finish()
    return manifest


def _run_step(step: Step, plan: Plan, spec: Any, models: Any, run_dir: Path, force: bool,
              found_whole: bool, echo: Callable[[str], None]) -> dict[str, Any]:
    kind = KINDS[step.kind]
    final = artefact_dir(run_dir, step.name, step.fingerprint)
    by_name = plan.by_name()
    inputs = {role: artefact_dir(run_dir, dep, by_name[dep].fingerprint)
              for role, dep in step.inputs.items()}
    record: dict[str, Any] = {"name": step.name, "kind": step.kind,
                              "fingerprint": step.fingerprint, "settings": step.settings,
                              "artefact": final.name}
    if final.exists() and not force:
        problem = check(final, found_whole)
        if problem is None:
            _publish(kind, final, run_dir)
            echo(f"  {step.name:<24} reused")
            record.update(status="reused", wall_s=0.0, peak_rss_mb=0.0,
                          llm=_zero_usage(), embed={"calls": 0, "cache_hits": 0})
            return record
        # like a corrupt cache entry: said once, on stderr (also under `kgrag query`), then
        # replaced; the damaged folder goes only when the rebuilt one is complete
        log.warning("%s: artefact %s is damaged (%s); rebuilding it, replaying cached model "
                    "calls", step.name, final.name, problem)
        record["damaged"] = problem
    llm_before, embed_before = models.usage_snapshot()
    started = time.perf_counter()
    with (PeakRSS() as rss, atomic_dir(final) as tmp, step_label(step.name),
          models.cache.recording() as used):
        ctx = StepContext(step, spec, models, tmp, inputs,
                          find_earlier=lambda: earlier_artefact(run_dir, step))
        kind.run(ctx)
        write_json_atomic(tmp / CALLS_RECORD, sorted(used))
        wall = time.perf_counter() - started
        llm_after, embed_after = models.usage_snapshot()
        llm = llm_after.since(llm_before).as_dict()
        embed = embed_after.since(embed_before).as_dict()
        record.update(status="ran", wall_s=round(wall, 3),
                      peak_rss_mb=round(rss.peak / 2**20, 1), llm=llm,
                      embed={"calls": embed["calls"], "cache_hits": embed["cache_hits"]},
                      **({"notes": ctx.notes} if ctx.notes else {}))
        # what building this artefact cost stays with it, for reports of later runs
        write_json_atomic(tmp / BUILD_RECORD, record)
        write_listing(tmp)  # last, so that it lists every file the artefact holds
    _publish(kind, final, run_dir)
    verb = "rebuilt" if "damaged" in record else "ran"
    earlier = ctx.notes.get("reused_from")  # a step that started from its earlier artefact
    echo(f"  {step.name:<24} {verb} in {wall:.1f}s  (llm calls {llm['calls']}, "
         f"cache hits {llm['cache_hits']}; embeddings {embed['calls']}, hits {embed['cache_hits']}"
         f"{f'; started from {earlier}' if earlier else ''})")
    return record


def earlier_artefact(run_dir: Path, step: Step) -> Path | None:
    """The newest intact artefact of ``step`` in ``run_dir`` that was built with the same
    settings (kind, version, config) over other inputs: what the step built before its
    inputs changed (documents added to the corpus), or None."""
    earlier = []
    for folder in run_dir.glob(f"{step.name}-*"):
        if folder.is_symlink() or any(p.is_symlink() for p in folder.rglob("*")):
            continue  # kgrag writes no link: what one points at is not this run's to read
        try:
            record = json.loads((folder / BUILD_RECORD).read_text())
        except (OSError, ValueError):
            continue
        if (isinstance(record, dict) and record.get("name") == step.name
                and record.get("settings") == step.settings
                and record.get("fingerprint") != step.fingerprint):
            earlier.append(((folder / BUILD_RECORD).stat().st_mtime, folder))
    for _, folder in sorted(earlier, reverse=True):
        if check(folder) is None:
            return folder
    return None


def _publish(kind: StepKind, artefact: Path, run_dir: Path) -> None:
    """Copy the kind's published files (metrics.json) into the run folder, on reuse too:
    the copy there may be gone, or another spec's written into the same run folder."""
    for name in kind.publish:
        shutil.copyfile(artefact / name, run_dir / name)


def _zero_usage() -> dict[str, int]:
    return {"calls": 0, "cache_hits": 0, "tokens_in": 0, "tokens_out": 0}
