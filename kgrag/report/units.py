"""Retrieval units as a reader meets them in the report: where each came from and its
text, opened by a click (``<details>``, so the page needs no script), and in a unit that
an answer cites, the answer's span marked.

A unit's text is its context, ``# <title>`` and the chunk text as the LLM read it, so
an answer copied from any part of what it was shown is found there.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import polars as pl

from kgrag.contents.bipartite import read_subchunks
from kgrag.contents.chunks import read_chunks
from kgrag.corpus.sources import chunk_sources
from kgrag.report.run_folder import RunFolder

CHUNKS = "chunks"  # the step that cuts the corpus into chunks
SUBCHUNKS = "bipartite"  # the kind of step whose artefact holds KET-RAG's sub-chunks


@dataclass(frozen=True)
class Unit:
    where: str  # a documents folder's file, page and heading ("" for other corpora)
    text: str  # the context the LLM read


def read_units(run: RunFolder, wanted: set[str]) -> dict[str, Unit]:
    """The units among ``wanted`` (ids) that the run's chunks and sub-chunks hold; a
    strategy over a knowledge graph retrieves triples, which have no such text. Only
    the wanted rows are kept, so a big corpus costs the report what it retrieved."""
    if CHUNKS not in run.artefacts:
        return {}
    chunks = read_chunks(run.artefact(CHUNKS))
    chosen = chunks.filter(pl.col("chunk_id").is_in(list(wanted)))
    where = chunk_sources(chosen)
    units = {unit: Unit(where.get(unit, ""), text)
             for unit, text in chosen.select("chunk_id", "context").iter_rows()}
    for step in run.manifest["steps"]:
        if step["kind"] == SUBCHUNKS:  # a sub-chunk comes from where its chunk came from
            subchunks = read_subchunks(run.artefact(step["name"]),
                                       ["chunk_id", "parent_chunk_id", "context"]).filter(
                pl.col("chunk_id").is_in(list(wanted)))
            parents = chunks.filter(pl.col("chunk_id").is_in(subchunks["parent_chunk_id"].to_list()))
            where = chunk_sources(parents)
            units |= {unit: Unit(where.get(parent, ""), text)
                      for unit, parent, text in subchunks.iter_rows()}
    return units


def unit_details(summary: str, text: str, *, answer: str | None = None,
                 opened: bool = False) -> str:
    """A unit as a ``<details>``: ``summary`` (HTML) always shown, its text on a click;
    with ``answer``, the answer's span in the text marked (``highlight``). ``opened``
    shows the text from the start."""
    body = escape(text) if answer is None else highlight(text, answer)
    return (f'<details class="unit"{" open" if opened else ""}><summary>{summary}</summary>'
            f'<div class="text">{body}</div></details>')


def highlight(text: str, answer: str) -> str:
    """``text`` HTML-escaped, with the first occurrence of ``answer`` in it wrapped in
    ``<mark>``; case and runs of whitespace (a PDF's line breaks) do not count. A text
    without the answer is escaped as it is."""
    haystack, positions = _folded(text)
    needle, _ = _folded(answer.strip())
    at = haystack.find(needle) if needle else -1
    if at < 0:
        return escape(text)
    start, end = positions[at], positions[at + len(needle) - 1] + 1
    return (f"{escape(text[:start])}<mark>{escape(text[start:end])}</mark>"
            f"{escape(text[end:])}")


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` case-folded with each run of whitespace one space, and for every
    character of that the index in ``text`` it came from."""
    chars: list[str] = []
    positions: list[int] = []
    for index, char in enumerate(text):
        if char.isspace():
            if chars and chars[-1] == " ":
                continue
            char = " "
        for folded in char.casefold():  # "ß" folds to "ss": both from one index
            chars.append(folded)
            positions.append(index)
    return "".join(chars), positions
