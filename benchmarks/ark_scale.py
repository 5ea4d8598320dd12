"""Run some steps of an ARK training spec (and only the steps they read), and print each
step's wall seconds and notes: how a long training is run in parts under the CPU lock.

    flock /tmp/kgrag-cpu.lock python benchmarks/ark_scale.py specs/scale/ark_joint.yaml \\
        stage1.ark-gold [stage3.ark ...]

Every step is fingerprinted and cached, so a part that was interrupted resumes where it
stopped (the alignment's log-probabilities through the call cache, a curriculum at its
last completed stage), and ``kgrag run`` on the spec afterwards reuses what ran here.
Each model's folder is printed: the evaluation specs name it as their embedder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kgrag

from kgrag import api
from kgrag.contents.training import model_dir
from kgrag.pipeline.runner import run_plan


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("steps", nargs="+", help="step names, e.g. stage1.ark-gold")
    args = parser.parse_args(argv)
    session = api.open_session(args.spec)
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, steps=session.plan.upstream(args.steps))
    for step in manifest.steps:
        print(f"{step['name']}: {step['status']}, {step.get('wall_s', 0):.1f} s, "
              f"llm {step.get('llm', {}).get('calls', 0)} calls, notes {step.get('notes', {})}")
    for name in args.steps:
        if name.startswith("stage"):
            print(f"{name} model: {model_dir(session.artefact(name))}")


if __name__ == "__main__":
    main(sys.argv[1:])
