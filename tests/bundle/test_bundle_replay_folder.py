"""A replay writes only in its own folder (``--dir``): not in the home folder, not in
the default cache, not where it was started. Where a bundled model must be unpacked, it
goes into its package's own folder (``kgrag.models.registry``)."""

from __future__ import annotations

import os
import subprocess
import sys

from kgrag.cli import main
from tests.conftest import REPO
from tests.pipeline.test_pipeline_documents import documents_spec
from tests.standin import RuleLLM, run_with


def test_a_replay_in_an_empty_home_writes_only_in_its_folder(project, tmp_path):
    """The real command, in a process of its own whose home and working folders are
    empty: a documents folder (its conversions cached) answered by Gemma (its GGUF
    resolved), replayed with 0 model calls, leaves both folders empty."""
    spec = documents_spec(project)
    run_with(spec, RuleLLM())
    bundle = tmp_path / "museums.tar.gz"
    assert main(["bundle", str(spec), "-o", str(bundle)]) == 0
    home, here, folder = tmp_path / "home", tmp_path / "here", tmp_path / "replay"
    home.mkdir()
    here.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("KGRAG_", "XDG_", "HF_"))}
    done = subprocess.run(
        [sys.executable, "-m", "kgrag.cli", "replay", str(bundle), "--dir", str(folder)],
        check=False, cwd=here, env={**env, "HOME": str(home), "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "0 model calls" in done.stdout and "identical to the bundle's" in done.stdout
    assert sorted(home.rglob("*")) == [] and sorted(here.rglob("*")) == []
    assert list((folder / "cache" / "converted").rglob("*.json"))  # the conversions
