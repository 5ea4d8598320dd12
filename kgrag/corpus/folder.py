"""What a corpus folder holds: its files, less the symbolic links that lead out of it.

A link in the folder to a file elsewhere (``passwd.txt -> /etc/passwd``) would make that
file one of the corpus's documents: its lines would reach the chunks, the answers'
prompts and a bundle, which ships the corpus to whoever receives it. So a link counts
only where it leads to a file inside the folder (the same file under a second name), and
one that leads out is skipped, named and counted, unless the spec asks to follow such
links (``corpus.follow_links``). The corpus step's fingerprint, a bundle's copy of the
folder and the importers (``text``, ``documents``) all list a folder here, so they read
the same files. (A linked folder is not entered either way, as ``Path.rglob`` does not.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FolderFiles:
    """The files of a folder to read, and the links leading out of it that were not
    followed, each sorted as ``sorted`` sorts paths."""

    files: list[Path]
    outside: list[Path]


def corpus_files(folder: Path, follow_links: bool = False) -> FolderFiles:
    """Every file under ``folder``, hidden ones too; with ``follow_links`` false, a link to
    a file outside ``folder`` is set apart in ``outside``."""
    root = folder.resolve()
    files: list[Path] = []
    outside: list[Path] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        leaves = not (follow_links or path.resolve().is_relative_to(root))
        (outside if leaves else files).append(path)
    return FolderFiles(files, outside)
