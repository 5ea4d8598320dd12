"""A bundle's index and calls as a replay reads them, checked before anything is written.

A bundle comes from another machine, and its checksums prove no origin: whoever rewrites
a member can rewrite the index and its seal too. So the replay trusts nothing in them
that says where to write: the index must have the shape ``kgrag bundle`` writes
(``SCHEMA``), the spec and every corpus source must sit under ``project/`` by plain
relative names (no ``..``, no leading ``/``, ``kgrag.bundle.archive.inside``), and the
bundle may hold only what ``kgrag bundle`` ships: the spec, the corpus sources' files,
the calls, the manifest and the metrics. No member can then land outside the replay
folder, nor in its cache or its run folder, where it would pose as the replay's own
work. Each problem is one ``KgragError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from kgrag.bundle.archive import inside
from kgrag.bundle.pack import CALLS
from kgrag.bundle.sources import PROJECT
from kgrag.configuration import Spec
from kgrag.contents.metrics import METRICS
from kgrag.errors import KgragError
from kgrag.pipeline.manifest import MANIFEST

SOURCE_KEYS = ("corpus.path", "corpus.questions_file")  # the corpus sources a spec names
TEXT = {"type": "string"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec", "sources", "models", "steps", "files"],
    "properties": {
        "spec": TEXT,
        "sources": {"type": "array", "items": {
            "type": "object", "required": ["key", "member", "sha256", "folder", "copied"],
            "properties": {"key": {"enum": list(SOURCE_KEYS)},
                           "member": TEXT, "sha256": TEXT, "folder": {"type": "boolean"},
                           "copied": {"type": "boolean"}}}},
        "models": {"type": "object",
                   "properties": {"pipeline": {"type": "object", "required": ["name"]}},
                   "additionalProperties": {
                       "type": "object", "required": ["name", "sha256"],
                       "properties": {"name": TEXT, "sha256": TEXT}}},
        "steps": {"type": "object", "additionalProperties": TEXT},
        "files": {"type": "object", "required": [CALLS]},
    },
}
VALIDATOR = Draft202012Validator(SCHEMA)
ROWS = {"type": "array", "items": {"type": "object"}}
METRICS_VALIDATOR = Draft202012Validator({
    "type": "object",
    "properties": {"rows": {**ROWS, "items": {"type": "object", "required": ["strategy"]}},
                   "builds": {**ROWS, "items": {"type": "object", "required": ["graph"]}}}})


def check_index(bundle: Path, index: dict[str, Any]) -> None:
    """Refuse an index a replay cannot follow, or one that would write anywhere but
    where ``kgrag bundle`` puts its members."""
    error = best_match(VALIDATOR.iter_errors(index))
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        raise _unusable(bundle, f"{where.lstrip('.') or 'the index'}: {error.message}")
    sources = index["sources"]
    places = {index["spec"]: "spec"} | {s["member"]: s["key"] for s in sources}
    if len(places) < len(sources) + 1 or len({s["key"] for s in sources}) < len(sources):
        raise _unusable(bundle, "its spec and corpus sources are not each in a place of "
                                "their own")
    for place, key in places.items():
        if not (inside(place) and place.startswith(f"{PROJECT}/")):
            raise _unusable(bundle, f"{key} {place!r} is not a place inside {PROJECT}/; "
                                    "a replay writes nothing outside its folder")
        for other in places:
            if other.startswith(f"{place}/"):
                raise _unusable(bundle, f"{places[other]} {other!r} lies inside {key}")
    folders = tuple(f"{s['member']}/" for s in sources if s["folder"])
    shipped = {index["spec"], CALLS, MANIFEST, METRICS} | {
        s["member"] for s in sources if not s["folder"]}
    for name in index["files"]:
        if name not in shipped and not name.startswith(folders):
            raise _unusable(bundle, f"it holds {name!r}, which kgrag bundle never ships")
    if index["spec"] not in index["files"]:
        raise _unusable(bundle, f"its spec {index['spec']!r} is not in it")


def check_spec(bundle: Path, folder: Path, spec: Spec, index: dict[str, Any],
               members: dict[str, bytes]) -> None:
    """Refuse an unpacked spec that would read its corpus from anywhere but the bundle's
    places for it, or whose run folder, which the replay builds, holds a member."""
    named = {key: spec.corpus[key.removeprefix("corpus.")] for key in SOURCE_KEYS
             if key.removeprefix("corpus.") in spec.corpus}
    places = {s["key"]: s["member"] for s in index["sources"]}
    for key in sorted(set(named) | set(places)):
        read = spec.resolve(named[key]) if key in named else None
        if key not in places or read != (folder / places[key]).resolve():
            raise _unusable(bundle, f"its spec reads {key} from {read}, not from the "
                                    f"bundle's {places.get(key, 'copy')}")
    run = spec.output_dir
    for name in members:
        if (folder / name).resolve().is_relative_to(run):
            raise _unusable(bundle, f"it holds {name!r}, inside the run folder {run} that "
                                    "the replay builds")


def read_calls(bundle: Path, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The cache entries of ``calls.jsonl``: one ``[key, payload]`` per line."""
    entries = []
    for number, line in enumerate(data.splitlines(), 1):
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep
            raise _unusable(bundle, f"{CALLS} line {number} is not JSON ({exc})") from None
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], dict)):
            raise _unusable(bundle, f"{CALLS} line {number} is not a [key, entry] pair")
        entries.append((entry[0], entry[1]))
    return entries


def read_bundled_metrics(bundle: Path, data: bytes | None) -> dict[str, Any] | None:
    """The bundle's ``metrics.json``, which the replay's metrics are compared with, if it
    ships one: a JSON object whose rows name their strategy and whose builds their
    graph, as ``kgrag.bundle.compare`` reads them."""
    if data is None:
        return None
    try:
        metrics = json.loads(data)
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep
        raise _unusable(bundle, f"{METRICS} is not JSON ({exc})") from None
    error = best_match(METRICS_VALIDATOR.iter_errors(metrics))
    if error is not None:
        raise _unusable(bundle, f"{METRICS} is not kgrag's metrics ({error.message:.200})")
    return metrics


def _unusable(bundle: Path, problem: str) -> KgragError:
    return KgragError(f"cannot replay {bundle}: {problem}; it was not made by kgrag bundle, "
                      "or was altered since")
