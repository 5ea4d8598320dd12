"""``kgrag replay``: unpack a bundle into a folder of its own and check it can be replayed.

Before anything runs, the bundle's checksums are verified, the corpus is in place
(shipped, or given with ``--corpus`` and matched by sha256), and every model the bundle
names is, by the spec's own models, the one it was made with (``Models.differences``
compares what ``Models.describe`` recorded); the call cache is the bundle's entries
alone, and it is sealed, so a replay never calls a model. The run itself and the
comparison of its metrics with the bundle's are ``kgrag.api.replay``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.bundle.archive import INDEX, read_archive
from kgrag.bundle.index import check_index, check_spec, read_bundled_metrics, read_calls
from kgrag.bundle.pack import CALLS
from kgrag.bundle.sources import PROJECT
from kgrag.configuration import resolved
from kgrag.contents.metrics import METRICS
from kgrag.corpus.folder import corpus_files
from kgrag.errors import KgragError, writing
from kgrag.models import Models
from kgrag.models.cache import CallCache
from kgrag.pipeline.compile import source_sha256
from kgrag.spec import Spec, load_spec

CACHE = "cache"  # the sealed call cache, and the spec's cache folder (conversions)
MODELS = "models"  # what resolving models writes (``kgrag.models.registry.unpacking_in``)
BATCH = 2000  # cache entries stored per transaction


@dataclass(frozen=True)
class Unpacked:
    """A bundle laid out in ``folder``: its index and members, the spec to run (under
    ``folder/project``), its models, and the sealed cache of the bundle's calls."""

    folder: Path
    index: dict[str, Any]
    members: dict[str, bytes]
    spec: Spec
    models: Models
    cache: CallCache
    metrics: dict[str, Any] | None  # the bundle's metrics.json, if it ships one


def unpack(bundle: Path, folder: Path, corpora: Iterable[Path],
           models_of: Callable[[Spec, CallCache], Models]) -> Unpacked:
    """Verify ``bundle``, write it into ``folder`` (new, empty, or an earlier replay of the
    same bundle, which then resumes), fill the sealed cache and open the spec's models
    (``models_of``); raises ``KgragError`` naming every missing corpus source and every
    model that is missing or differs. Nothing is written before the index is known to
    name only places inside ``folder`` (``kgrag.bundle.index``), and nothing outside it
    after: the spec's cache, where the documents' conversions go, is ``folder/cache``."""
    index, members = read_archive(bundle)
    check_index(bundle, index)
    calls = read_calls(bundle, members[CALLS])
    metrics = read_bundled_metrics(bundle, members.get(METRICS))
    with writing(folder, f"the replay of {bundle.name}",
                 "free space there or make it writable (or choose another folder with --dir)"):
        _claim(folder, members[INDEX])
        for name, data in members.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    spec = load_spec(folder / index["spec"], folder / PROJECT).with_cache_dir(folder / CACHE)
    check_spec(bundle, folder, spec, index, members)
    problems = _place_corpora(folder, index["sources"], list(corpora),
                              spec.corpus.get("follow_links", False))
    cache = CallCache(folder / CACHE, sealed=True)
    try:
        models = models_of(spec, cache)
        problems += models.differences(index["models"])
        if problems:
            raise KgragError(f"cannot replay {bundle}: " + "; ".join(problems))
        for start in range(0, len(calls), BATCH):
            cache.set_many(calls[start:start + BATCH])
    except BaseException:
        cache.close()
        raise
    return Unpacked(folder, index, members, spec, models, cache, metrics)


def _claim(folder: Path, index: bytes) -> None:
    """Refuse a folder holding anything but an earlier replay of this same bundle."""
    if folder.is_file():
        raise KgragError(f"{folder} is a file; replay unpacks into a folder")
    if folder.exists() and any(folder.iterdir()):
        earlier = folder / INDEX
        if not (earlier.is_file() and earlier.read_bytes() == index):
            raise KgragError(f"{folder} is not empty and holds no replay of this bundle; "
                             "choose another folder with --dir")
    folder.mkdir(parents=True, exist_ok=True)


def _place_corpora(folder: Path, sources: list[dict[str, Any]], given: list[Path],
                   follow_links: bool) -> list[str]:
    """Copy each ``--corpus`` path to where the spec expects the source of the same sha256
    (of a folder, the files its importer reads: ``follow_links`` as the spec says); the
    problems for sources that are neither shipped nor given."""
    problems = []
    hashes = {source_sha256(resolved(path, f"--corpus {path}"), f"--corpus {path}",
                            follow_links): path for path in given}
    for source in sources:
        target = folder / source["member"]
        if source["copied"] or (target.exists() and source_sha256(
                target, source["key"], follow_links) == source["sha256"]):
            continue
        path = hashes.get(source["sha256"])
        if path is None:
            problems.append(f"{source['key']} is not in the bundle (made with --no-corpus): "
                            f"give the {'folder' if source['folder'] else 'file'} of sha256 "
                            f"{source['sha256'][:16]}… with --corpus PATH")
            continue
        copies = {target: path}
        if source["folder"]:
            copies = {target / file.relative_to(path): file
                      for file in corpus_files(path, follow_links).files}
        for copy, original in copies.items():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(original, copy)
    return problems
