"""The locked install: ``requirements/lock.txt`` covers what ``pyproject.toml`` asks for, and
the library versions a run's manifest records are the lock's pins.

``make install`` installs exactly the lock (``--require-hashes``), then kgrag itself,
editable and with no dependencies, so in a venv it made every version below is the
lock's. A failure here means pyproject.toml changed without ``make lock``, or the venv
predates the lock: ``make install`` brings it back.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kgrag.pipeline.manifest import LIBRARIES, library_versions
from tests.conftest import REPO

LOCKS = REPO / "requirements"


def pins(lock: str) -> dict[str, str]:
    """``{normalised name: version}`` of every ``name==version`` line of a lock file."""
    lines = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", (LOCKS / lock).read_text(),
                       re.MULTILINE)
    return {canonicalize_name(name): version for name, version in lines}


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_lock_pins_every_requirement_of_pyproject_within_its_range():
    locked = pins("lock.txt")
    spec = project()
    wanted = spec["dependencies"] + [r for extra in spec.get("optional-dependencies", {}).values()
                                      for r in extra]
    stale = []
    for line in wanted:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate():
            continue
        version = locked.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            stale.append(f"{line} (lock: {version or 'absent'})")
    assert not stale, f"pyproject.toml asks for what requirements/lock.txt lacks: {stale}; " \
                      "run `make lock`"


def test_pip_and_build_locks_agree_with_the_main_lock():
    locked = pins("lock.txt")
    for lock in ("pip.txt", "build.txt"):
        shared = {name: version for name, version in pins(lock).items() if name in locked}
        assert shared == {name: locked[name] for name in shared}, lock


def test_manifest_library_versions_are_the_lock_pins():
    locked = pins("lock.txt")
    recorded = library_versions()
    kgrag = canonicalize_name("kgrag")
    for name in LIBRARIES:
        if canonicalize_name(name) == kgrag:
            continue  # installed editable from this checkout, not from the lock
        assert canonicalize_name(name) in locked, f"the manifest records {name}, the lock lacks it"
        assert recorded[name] == locked[canonicalize_name(name)], \
            f"{name}: installed {recorded[name]}, locked {locked[canonicalize_name(name)]}; " \
            "run `make install`"
    assert recorded["kgrag"] == project()["version"] == metadata.version("kgrag")


def test_lock_holds_the_cpu_build_of_torch():
    # PyPI's torch of the same version is the CUDA build (~3 GB more); `make lock` on a
    # machine whose pip does not see the local CPU wheel would silently pick it.
    assert pins("lock.txt")["torch"].endswith("+cpu")
