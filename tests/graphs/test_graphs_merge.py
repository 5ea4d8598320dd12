"""The streamed merge against a plain reading of its rules, on real MuSiQue paragraphs
parsed by the bundled spaCy pipeline and replayed with tied types, restated
descriptions and out-of-order chunks; and the extractions read in bounded batches."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from kgrag.errors import KgragError
from kgrag.graphs import merge as merging
from kgrag.graphs.elements import Extraction
from kgrag.graphs.extraction.nlp import Chunk, NlpExtractor
from kgrag.graphs.merge import (
    DESCRIPTION_SEPARATOR,
    ENTITY_FRAME_SCHEMA,
    RELATIONSHIP_FRAME_SCHEMA,
    MergeFiles,
    member_batches,
    member_frames,
    merge,
    merge_to,
)
from kgrag.graphs.spill import RangeSpill
from kgrag.models.cache import CallCache
from kgrag.models.pipelines import resolve_pipeline
from tests.conftest import SHARED_DATA

TYPES = ("person", "geo", "organization", "other")


def reference(extractions: list[Extraction]) -> tuple[list[dict], list[dict]]:
    """The module docstring's rules, read literally: one Python object per member."""
    ordered = sorted((x for x in extractions if not x.failed), key=lambda x: x.chunk_id)
    named: dict[str, list] = {}
    paired: dict[frozenset[str], list] = {}
    for x in ordered:
        for e in x.entities:
            named.setdefault(e.name, []).append((x.chunk_id, e))
        for r in x.relationships:
            if r.source != r.target:
                paired.setdefault(frozenset((r.source, r.target)), []).append((x.chunk_id, r))

    def joined(descriptions) -> str:
        parts = [p for d in descriptions for p in d.split(DESCRIPTION_SEPARATOR) if p]
        return DESCRIPTION_SEPARATOR.join(dict.fromkeys(parts))

    entities = []
    for name in sorted(named):
        members = named[name]
        types = Counter(e.type for _, e in members if e.type != "other")
        entities.append({
            "name": name, "type": types.most_common(1)[0][0] if types else "other",
            "description": joined(e.description for _, e in members),
            "source_chunk_ids": list(dict.fromkeys(c for c, _ in members)),
            "grounded": any(e.grounded for _, e in members)})
    relationships = sorted(({
        "source": members[0][1].source, "target": members[0][1].target,
        "description": joined(r.description for _, r in members),
        "strength": sum(float(r.strength) for _, r in members) / len(members),
        "weight": sum(r.strength for _, r in members),
        "source_chunk_ids": list(dict.fromkeys(c for c, _ in members)),
        "grounded": any(r.grounded for _, r in members)} for members in paired.values()),
        key=lambda row: (row["source"], row["target"]))
    return entities, relationships


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> list[Extraction]:
    """The first 40 paragraphs of MuSiQue, extracted as the extract step does."""
    paragraphs = []
    with (SHARED_DATA / "musique_200.jsonl").open() as lines:
        for line in lines:
            paragraphs += json.loads(line)["paragraphs"]
            if len(paragraphs) >= 40:
                break
    chunks = [Chunk(f"m{k:02d}", p["paragraph_text"], p["title"])
              for k, p in enumerate(paragraphs[:40])]
    cache = CallCache(tmp_path_factory.mktemp("calls"))
    return NlpExtractor(resolve_pipeline("en_core_web_sm"), cache).extract(chunks)


@pytest.fixture(scope="module")
def replayed(parsed: list[Extraction]) -> list[Extraction]:
    """The paragraphs, then each again under an earlier-sorting chunk id with its types
    rotated, its relationships turned round and its descriptions restated, arriving in
    reverse: every name has tied types, every pair members of both orientations, every
    description a repeat; one chunk failed."""
    def again(x: Extraction, k: int) -> Extraction:
        return replace(
            x, chunk_id=f"a{k:02d}",
            entities=tuple(replace(e, type=TYPES[(TYPES.index(e.type) + 1) % len(TYPES)]
                                   if e.type in TYPES else "person",
                                   description=f"{e.description}; {e.description}")
                           for e in x.entities),
            relationships=tuple(replace(r, source=r.target, target=r.source,
                                        strength=r.strength + k % 3)
                                for r in x.relationships))
    failed = Extraction("a99", (), (), attempts=3, error="InvalidOutput")
    return [*reversed([again(x, k) for k, x in enumerate(parsed)]), failed, *parsed]


def test_the_replay_holds_ties_that_other_rules_settle_differently(
        replayed: list[Extraction]) -> None:
    """So that a merge breaking type ties by the alphabet or by the last member fails."""
    types: dict[str, list[str]] = {}
    for x in sorted(replayed, key=lambda x: x.chunk_id):
        for e in x.entities:
            if e.type != "other":
                types.setdefault(e.name, []).append(e.type)
    tied = {name: seen for name, seen in types.items()
            if len(Counter(seen).most_common(2)) == 2
            and len({n for _, n in Counter(seen).most_common(2)}) == 1}
    first_seen = {name: Counter(seen).most_common(1)[0][0] for name, seen in tied.items()}
    assert any(first_seen[name] != min(seen) for name, seen in tied.items())
    assert any(first_seen[name] != Counter(reversed(seen)).most_common(1)[0][0]
               for name, seen in tied.items())


@pytest.mark.parametrize(("batch", "part_rows", "spill_rows", "sample"),
                         [(1, 10**6, 10**6, 10), (7, 50, 300, 2), (1000, 200_000, 100, 1),
                          (3, 40, 50, 1)])
def test_the_streamed_merge_is_the_rules_merge_at_any_batch_and_part_size(
        replayed: list[Extraction], batch: int, part_rows: int, spill_rows: int, sample: int,
        monkeypatch) -> None:
    """Spilled parts of ``spill_rows`` members with ranges cut at the first ``sample``
    batches (one batch of 3 chunks gives ranges far from even), each merged in
    sub-parts of ``part_rows``."""
    monkeypatch.setattr(merging, "MERGE_BATCH", batch)
    monkeypatch.setattr(merging, "PART_ROWS", part_rows)
    monkeypatch.setattr(merging, "SPILL_ROWS", spill_rows)
    monkeypatch.setattr(merging, "SAMPLE_BATCHES", sample)
    entities, relationships = merge(iter(replayed), chunks=len(replayed))
    want_entities, want_relationships = reference(replayed)
    assert entities.to_dicts() == want_entities
    assert relationships.to_dicts() == want_relationships
    assert dict(entities.schema) == ENTITY_FRAME_SCHEMA
    assert dict(relationships.schema) == RELATIONSHIP_FRAME_SCHEMA


def test_extractions_are_read_one_batch_at_a_time(replayed: list[Extraction],
                                                  monkeypatch) -> None:
    monkeypatch.setattr(merging, "MERGE_BATCH", 10)
    pulled = 0

    def arriving() -> Iterator[Extraction]:
        nonlocal pulled
        for x in replayed:
            pulled += 1
            yield x

    seen: list[tuple[int, int]] = []
    merge(arriving(), lambda batch: seen.append((len(batch), pulled)))
    assert [n for n, _ in seen] == [10] * 8 + [1]
    assert all(at == 10 * (k + 1) for k, (_, at) in enumerate(seen[:-1]))


def test_the_nlp_stream_parses_first_then_reads_back_lazily(tmp_path: Path) -> None:
    chunks = [Chunk("c0", "Paris is the capital of France.", None),
              Chunk("c1", "The Seine flows through Paris.", "Seine"),
              Chunk("c2", "Paris is the capital of France.", None)]  # c0's text again
    cache = CallCache(tmp_path / "calls")
    extractor = NlpExtractor(resolve_pipeline("en_core_web_sm"), cache)
    streamed = extractor.stream(chunks)
    assert (extractor.parsed, extractor.cache_hits) == (2, 1)  # parsed before reading
    assert list(streamed) == NlpExtractor(extractor.pipeline, cache).extract(chunks)
    gone = extractor.stream(chunks)
    cache.clear()
    with pytest.raises(KgragError, match="lost 2 entries"):
        next(gone)


def test_the_spill_and_the_members_stay_on_disk_in_order(replayed: list[Extraction],
                                                         tmp_path: Path, monkeypatch) -> None:
    """The members come back in arrival order, the spilled parts cover the names in
    order with every name in one part, and the scratch folder is gone after."""
    monkeypatch.setattr(merging, "MERGE_BATCH", 5)
    monkeypatch.setattr(merging, "SPILL_ROWS", 200)
    parts: list[pl.DataFrame] = []
    spilled = RangeSpill.parts

    def kept(self: RangeSpill):
        for part in spilled(self):
            if self.column == "name":
                parts.append(part)
            yield part

    monkeypatch.setattr(RangeSpill, "parts", kept)
    files = MergeFiles(tmp_path / "e.parquet", tmp_path / "r.parquet",
                       (tmp_path / "em.parquet", tmp_path / "rm.parquet"))
    written = merge_to(member_batches(replayed), len(replayed), tmp_path / "scratch", files)
    assert written == (pl.read_parquet(files.entities).height,
                       pl.read_parquet(files.relationships).height)
    want = member_frames(replayed)
    assert pl.read_parquet(tmp_path / "em.parquet").equals(want[0])
    assert pl.read_parquet(tmp_path / "rm.parquet").equals(want[1])
    assert len(parts) > 2
    assert all(a["name"].max() < b["name"].min() for a, b in itertools.pairwise(parts))
    assert not (tmp_path / "scratch").exists()
