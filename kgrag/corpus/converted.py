"""The conversion cache: a file's converted text, kept by the sha256 of its bytes and the
suffix that chose its converter.

Converting a PDF or a DOCX file costs far more than hashing it, and a folder corpus that
gains one file is imported again whole; keyed by content (and the converters' version),
a rerun converts only the files it has not seen. The suffix is part of the key because the
verdict is the converter's, not the bytes': an empty ``.docx`` is not a readable DOCX
file, the same empty bytes as ``.txt`` are an empty document (keyed by bytes alone, the
first verdict was every later one's). A failure is kept too (an encrypted PDF
stays encrypted), so a rerun does not retry it. Entries are small JSON files written
atomically (temporary file, then rename), so two imports may share the folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from kgrag.corpus.convert import CONVERTER_VERSION, Block, Converted, Unreadable


class ConversionCache:
    """Converted documents under ``folder``, one JSON file per (version, sha256, suffix)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / f"v{CONVERTER_VERSION}"

    def _path(self, sha256: str, suffix: str) -> Path:
        return self.folder / sha256[:2] / f"{sha256}{suffix}.json"

    def get(self, sha256: str, suffix: str) -> Converted | Unreadable | None:
        """The cached conversion (or failure) of these bytes read as ``suffix`` (``.pdf``);
        None when not cached or the entry cannot be read (it is then converted again and
        rewritten)."""
        try:
            entry = json.loads(self._path(sha256, suffix).read_text(encoding="utf-8"))
            if "failure" in entry:
                return Unreadable(*entry["failure"])
            return Converted(tuple(Block(*b) for b in entry["blocks"]), entry["title"])
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, sha256: str, suffix: str, result: Converted | Unreadable) -> None:
        if isinstance(result, Unreadable):
            entry: dict = {"failure": [result.kind, result.detail]}
        else:
            entry = {"title": result.title,
                     "blocks": [[b.text, b.page, b.heading] for b in result.blocks]}
        path = self._path(sha256, suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(entry, out, ensure_ascii=False)
        os.replace(temporary, path)
