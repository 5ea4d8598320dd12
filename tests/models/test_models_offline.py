"""kgrag's process never reports usage: ``import openvino`` on its own sends an event to
Google Analytics from a forked process and writes a client id under ``~/intel``; after
``kgrag.models.offline.offline()`` (called before every import of OpenVINO, NNCF and the
Hugging Face loaders) it does neither."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openvino")

# Counts the forks the import makes; the process's consent state comes from HOME.
PROBE = """
import os, sys, time
forks = []
os.register_at_fork(before=lambda: forks.append(1))
if sys.argv[1] == "kgrag":
    from kgrag.models.offline import offline
    offline()
import openvino
from openvino_telemetry import Telemetry
telemetry = Telemetry()  # the one the import made (a singleton)
deadline = time.monotonic() + 120
while telemetry.sender.queue_size and time.monotonic() < deadline:  # the sends in flight
    time.sleep(0.05)
print(len(forks), telemetry.consent)
"""


def probe(home: Path, how: str) -> tuple[int, bool]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "TF_BUILD", "JENKINS_URL")}  # CI alone would decline
    env["HOME"] = str(home)
    out = subprocess.run([sys.executable, "-c", PROBE, how], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    return int(out[0]), out[1] == "True"


def test_openvino_reports_nothing_from_a_kgrag_process(tmp_path):
    plain, kgrag = tmp_path / "plain", tmp_path / "kgrag"
    plain.mkdir()
    kgrag.mkdir()
    # the library's own behaviour, which the test relies on: it would report and fork
    forks, consent = probe(plain, "plain")
    assert consent and forks >= 1 and (plain / "intel").exists()
    forks, consent = probe(kgrag, "kgrag")
    assert (forks, consent) == (0, False)
    assert not (kgrag / "intel").exists()  # no client id, no usage count written
