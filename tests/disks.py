"""Real full and read-only folders for tests, without touching the machine's mounts.

A folder is made full or read-only by mounting a small tmpfs over it inside a private
mount namespace (``unshare -m``) that exists for one subprocess only: the mount is
gone when the subprocess ends, whatever happens to the test. Mounting needs root (or
a user namespace); where it is not allowed these tests skip, and the tests that
raise the same ``OSError`` by monkeypatching still run. A chmod'ed folder is no
substitute: root writes through it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Disk:
    """A tmpfs of ``size_kib`` over ``folder`` holding a copy of what the folder held,
    then made read-only (``read_only``) or full to its last byte (``full``)."""

    folder: Path
    size_kib: int
    read_only: bool = False
    full: bool = False

    def script(self) -> str:
        folder = shlex.quote(str(self.folder))
        lines = []
        self.folder.mkdir(parents=True, exist_ok=True)
        source = self.folder.with_name(f"{self.folder.name}.before-mount")
        shutil.copytree(self.folder, source, symlinks=True, dirs_exist_ok=True)
        lines.append(f"mount -t tmpfs -o size={self.size_kib}k tmpfs {folder}")
        lines.append(f"cp -a {shlex.quote(str(source))}/. {folder}/")
        if self.full:  # dd stops at the first write the disk refuses
            lines.append(f"dd if=/dev/zero of={folder}/filler bs=1k 2>/dev/null || true")
        if self.read_only:
            lines.append(f"mount -o remount,ro {folder}")
        return "\n".join(lines)


def mounting_allowed() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                           check=False, capture_output=True)
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(not mounting_allowed(), reason="cannot mount a tmpfs here "
                                  "(needs root or user namespaces, and unshare)")


def kgrag_on(disks: list[Disk], *argv: str, env: dict[str, str] | None = None,
             then: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``kgrag ARGV`` (this checkout's) with ``disks`` mounted for it alone, then the
    shell command ``then`` while they still are (to look at what kgrag left there); the
    result has kgrag's exit code."""
    script = ("set -e\n" + "\n".join(d.script() for d in disks)
              + f'\nset +e\n"$@" >&2\ncode=$?\n{then}\nexit $code')
    command = [sys.executable, "-m", "kgrag.cli", *argv]
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *command],
                          check=False, capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)})
