"""Whether the run's outputs folder has room for what the run will write, judged before
any work: a corpus too large for the disk should be one message at the start, not a
full disk hours into a build (which ``kgrag.errors.writing`` still turns into one
message, after the work).

The estimate carries the artefact bytes per corpus token that ``benchmarks/scale.py``
measured (``BYTES_PER_TOKEN``, per step kind; see docs/scale.md) to the tokens the
corpus holds, guessed from its bytes on disk at ``TEXT_BYTES_PER_TOKEN``. They were
measured on passages of about one chunk each; longer documents fill their chunks, so need
fewer bytes per token, and the estimate errs on the safe side. Only the steps that will
run count (a reused artefact is already on the disk); the call cache, wherever it lives,
is not counted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from kgrag.errors import KgragError

# Artefact bytes per corpus token of the step kinds an LLM-free build runs, measured on
# the 1,953-chunk scale corpus (docs/scale.md); a kind not listed: OTHER_BYTES_PER_TOKEN.
# The extract step's 9.9 is counted with what its merge spills while it runs (the
# members and the merged relationships, about 0.6 of the artefact, ``kgrag.graphs.spill``).
# The dense step's 12.0 for its table, plus its matrix file: 384 float32 a chunk of about
# 136 tokens (``kgrag.contents.dense.MATRIX_FILE``).
BYTES_PER_TOKEN = {"import": 1.6, "chunk": 3.1, "extract": 16.0, "dense_index": 23.3}
OTHER_BYTES_PER_TOKEN = 0.5
TEXT_BYTES_PER_TOKEN = 4  # English text in a file, JSON quoting included, per WordPiece token
MARGIN = 1.2  # the estimate is of the order of the need, not its last byte


def corpus_bytes(path: Path) -> int:
    """The bytes of the corpus file, or of every file under the corpus folder (0 for a
    path that is neither: the import says what is wrong with it)."""
    if not path.is_dir():
        return path.stat().st_size if path.is_file() else 0
    total = 0
    for folder, _, files in os.walk(path):  # unreadable folders and links to folders skipped
        for name in files:
            with contextlib.suppress(OSError):  # a dangling link, a file gone meanwhile
                total += os.stat(os.path.join(folder, name)).st_size
    return total


def needed_bytes(corpus_size: int, kinds: Iterable[str]) -> int:
    """Bytes the artefacts of step kinds ``kinds`` take for a corpus of ``corpus_size``
    bytes."""
    per_token = sum(BYTES_PER_TOKEN.get(kind, OTHER_BYTES_PER_TOKEN) for kind in kinds)
    return int(MARGIN * corpus_size / TEXT_BYTES_PER_TOKEN * per_token)


def _existing(folder: Path) -> Path:
    """The folder, or the nearest folder above it that exists (a run not yet started)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_space(corpus: Path, kinds: Iterable[str], run_dir: Path) -> None:
    """Refuse a run whose outputs will not fit on ``run_dir``'s disk, naming the corpus
    and the space needed, before any work."""
    need = needed_bytes(corpus_bytes(corpus), kinds)
    free = shutil.disk_usage(_existing(run_dir)).free
    if need > free:
        raise KgragError(
            f"the corpus {corpus} is too large for the disk of {run_dir}: its artefacts "
            f"need about {_size(need)}, and that disk has {_size(free)} free; free space "
            "there or set the spec's outputs to a folder on a larger disk")


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
