"""A context cut into the parts an answer can cite.

A strategy whose context is its chunks, one after another (naive, bm25, fusion, ppr), is
cut at its chunks: each part is a chunk, named by its id. Every other strategy's context
holds more than chunks: ``ket``'s and local search's titled sections (``-----Entities-----``
rows, ``-----Sources-----`` text units, ``-----Keyword sources-----`` sub-chunks), HugRAG's
modules, entities, relationships and chunks. Those are cut at their blank lines, as they
are laid out (``kgrag.retrieval.layout``, HugRAG's evidence items): a section's header line
is dropped, a table's rows (the lines under a column header ``id|entity|…``) are a part
each, and any other block is one part. A part whose text is one of the retrieved chunks
is named by that chunk's id; the rest (a summary, a triple, a sub-chunk) by none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_HEADER = re.compile(r"-{3,}[^\n]*-{3,}")


@dataclass(frozen=True)
class Part:
    """One citable part of a context: its text and the chunk it is (None when it is
    something else)."""

    text: str
    unit_id: str | None


def context_parts(unit_ids: Sequence[str], context: str,
                  text_of: Mapping[str, str]) -> list[Part]:
    """``context`` cut into its parts (see the module docstring)."""
    if all(u in text_of for u in unit_ids) and "\n\n".join(
            text_of[u] for u in unit_ids) == context:
        return [Part(text_of[u], u) for u in unit_ids]
    chunk_of = {text_of[u]: u for u in unit_ids if u in text_of}
    parts: list[Part] = []
    for block in context.split("\n\n"):
        lines = block.split("\n")
        if _HEADER.fullmatch(lines[0].strip()):
            lines = lines[1:]
            if len(lines) > 1 and "|" in lines[0] and " " not in lines[0]:  # a table
                parts += [Part(row, None) for row in lines[1:] if row.strip()]
                continue
        text = "\n".join(lines).strip()
        if text:
            parts.append(Part(text, chunk_of.get(text)))
    return parts
