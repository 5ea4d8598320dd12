"""KET-RAG's skeleton build as three steps (Alg. 3, KG part).

``core``     KNN chunk graph + PageRank (or uniform) core selection — no LLM.
``extract``  extraction on the core chunks only: LLM calls (``method: llm``, the one
             LLM-paying step), a spaCy parse (``method: nlp``, no LLM) or both (``method:
             hybrid``: the parse's entities, related by one LLM call per chunk). Its
             per-chunk results live in the shared cache, keyed by chunk text and
             model, prompt and schema or pipeline and extractor version, so any
             other build over the same chunks (another β, HugRAG's hierarchy)
             replays them instead of paying again. Where one entry holds a chunk's
             whole extraction (``nlp``), the step rebuilt over a changed corpus (files
             added to a documents folder) takes the chunks its earlier artefact
             extracted from there (``kgrag.contents.extraction.read_members``), and
             replays or parses only the others: the same tables, for the cost of the
             new chunks and the merge.
``skeleton`` entity and relationship tables with rendered rows, entity and
             (unless ``relationship_vectors: false``) relationship vectors in LanceDB,
             a GraphML export, and (optionally)
             one LLM-written description per entity or relationship seen in
             several chunks.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from kgrag.contents.chunks import chunk_frames, count_chunks, read_chunks
from kgrag.contents.columns import counted
from kgrag.contents.core import read_core_ids, write_core
from kgrag.contents.entities import numbered
from kgrag.contents.extraction import merge_files, read_extraction, read_members, write_counts
from kgrag.contents.skeleton import write_skeleton
from kgrag.graphs.core import core_size, pagerank, select_core
from kgrag.graphs.descriptions import summarise
from kgrag.graphs.elements import counts_frame
from kgrag.graphs.extraction.methods import method_of
from kgrag.graphs.extraction.nlp import Chunk
from kgrag.graphs.knn import knn_graph
from kgrag.graphs.merge import member_batches, merge_to
from kgrag.retrieval.units import unit_text
from kgrag.steps.step import Counts, StepContext, step_kind

# Chunks read and extracted at a time: about 110 MB of them as ``Chunk`` objects and their
# cache keys at 1.4 KB of text a chunk, whatever the corpus's size.
EXTRACT_ROWS = 32_768
KEYED = {"chunk_id": pl.String, "key": pl.String}


@step_kind("core", "1")
def core(ctx: StepContext) -> None:
    chunks = read_chunks(ctx.input("chunks"), ["chunk_id", "context"])
    texts = chunks["context"].to_list()
    graph = knn_graph(texts, ctx.models.embedder.encode(texts), ctx.config["knn_k"])
    chosen = select_core(graph, ctx.config["beta"], ctx.config["select"], ctx.config["seed"])
    selected = np.zeros(len(texts), dtype=bool)
    selected[chosen] = True
    write_core(ctx.out_dir, chunks["chunk_id"], pagerank(graph), selected, graph.nonzero())
    ctx.notes.update(chunks=len(texts), core_chunks=int(selected.sum()),
                     knn_edges=int(graph.nnz // 2))


def extraction_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """The method's calls per core chunk, plus the retries each may need."""
    per_chunk = method_of(config).llm_calls_per_chunk
    if not per_chunk:
        return 0
    if counts.chunks is None:
        return None
    return core_size(config["beta"], counts.chunks) * per_chunk * (
        1 + config["llm"]["max_retries"])


def _to_extract(ctx: StepContext, taken: pl.Series | None = None) -> Iterator[list[Chunk]]:
    """The chunks the extract step reads, ``EXTRACT_ROWS`` of the chunk table at a time
    (the core's only, where the step has a core; none of ``taken``), each with its title
    where its unit shows it: no part of the table is held after its chunks are read."""
    # HugRAG's hierarchy extracts from every chunk: it has no core step
    core = read_core_ids(ctx.input("core")).implode() if "core" in ctx.inputs else None
    skip = None if taken is None else taken.implode()
    for todo in chunk_frames(ctx.input("chunks"), ["chunk_id", "title", "text", "context"],
                             EXTRACT_ROWS):
        if core is not None:
            todo = todo.filter(pl.col("chunk_id").is_in(core))
        if skip is not None:
            todo = todo.filter(~pl.col("chunk_id").is_in(skip))
        # the title counts only where the unit shows it (``chunking.title``)
        shown = todo.select("chunk_id", "title", "text",
                            titled=pl.col("context") == unit_text(with_title=True))
        if shown.height:
            yield [Chunk(chunk_id, text, title if titled else None)
                   for chunk_id, title, text, titled in shown.iter_rows()]


@step_kind("extract", "2", max_llm_calls=extraction_calls)
def extract_core(ctx: StepContext) -> None:
    method = method_of(ctx.config)
    keyed = None if method.keys is None else pl.concat(
        [pl.DataFrame({"chunk_id": [c.chunk_id for c in part], "key": method.keys(part, ctx)},
                      schema=KEYED) for part in _to_extract(ctx)] or [pl.DataFrame(schema=KEYED)])
    kept = None if keyed is None else ctx.from_earlier(lambda f: read_members(f, keyed))
    total = _extracted_count(ctx)
    taken, taken_count = None, 0
    if kept is not None:  # the chunks the earlier build extracted
        ctx.models.cache.relied_on(kept.counts["key"].to_list())
        taken, taken_count = kept.counts["chunk_id"], kept.counts.height
        ctx.notes["reused_chunks"] = taken_count
    recorded: list[pl.DataFrame] = []  # each batch's counts, as the merge reads it
    extractions = itertools.chain.from_iterable(
        method.extract(part, ctx.config, ctx)
        for part in _labelled(ctx, _to_extract(ctx, taken), total - taken_count))
    batches = member_batches(extractions, lambda batch: recorded.append(counts_frame(batch)))
    if kept is not None:
        batches = itertools.chain(kept.batches(), batches)
    entities, relationships = merge_to(batches, total, ctx.out_dir / "merging",
                                       merge_files(ctx.out_dir, members=keyed is not None))
    counts = pl.concat(recorded).rechunk() if recorded else counts_frame([])
    if keyed is not None:
        counts = counts.join(keyed, on="chunk_id", maintain_order="left")
        if kept is not None:
            counts = keyed.select("chunk_id").join(pl.concat([kept.counts, counts]),
                                                   on="chunk_id", maintain_order="left")
    write_counts(ctx.out_dir, counts)
    ctx.notes.update(**_extraction_notes(counts), entities=entities,
                     relationships=relationships)


def _labelled(ctx: StepContext, parts: Iterator[list[Chunk]], total: int
              ) -> Iterator[list[Chunk]]:
    """``parts``, each named in the step's progress while it is extracted where there
    are several ("chunks 32,769–65,536 of 248,460")."""
    done = 0
    for part in parts:
        if len(part) < total:
            ctx.part = f"chunks {done + 1:,}–{done + len(part):,} of {total:,}"
        yield part
        done += len(part)
    ctx.part = ""


def _extracted_count(ctx: StepContext) -> int:
    """How many chunks the extract step reads: its core's, or every chunk."""
    if "core" in ctx.inputs:
        return read_core_ids(ctx.input("core")).len()
    return count_chunks(ctx.input("chunks")) or 0


def _extraction_notes(counts: pl.DataFrame) -> dict[str, Any]:
    """The extract step's notes on its chunks, from their counts (``counts_frame``)."""
    if counts.is_empty():
        return {"core_chunks": 0, "attempts": 0, "failed_chunks": [], "parsed_first_try": 0.0,
                "empty_chunks": 0}
    ok = pl.col("error").is_null()
    tally = counts.select(
        attempts=pl.col("attempts").sum(),
        first_try=(ok & (pl.col("attempts") == 1)).sum(),
        empty=(ok & (pl.col("entities") == 0)).sum()).row(0, named=True)
    return {"core_chunks": counts.height, "attempts": tally["attempts"],
            "failed_chunks": counts.filter(~ok)["chunk_id"].to_list(),
            "parsed_first_try": round(tally["first_try"] / counts.height, 4),
            "empty_chunks": tally["empty"]}


def skeleton_calls(config: dict[str, Any], counts: Counts) -> int | None:
    """No call, or one per description joined from several chunks (known once extracted)."""
    return None if "summarise" in config else 0


@step_kind("skeleton", "2", max_llm_calls=skeleton_calls)
def skeleton(ctx: StepContext) -> None:
    entities, relationships = read_extraction(ctx.input("extract"), ctx.step.name)
    tokenizer = ctx.models.tokenizer
    if "summarise" in ctx.config:
        entities, relationships = _summarise_descriptions(ctx, entities, relationships)
    entities, relationships = numbered(entities, relationships)
    entities = counted(entities.with_columns(
        row=pl.format("{}|{}|{}|{}", "entity_id", "name", "type", "description")),
        "row", "row_tokens", tokenizer)
    relationships = counted(relationships.with_columns(
        row=pl.format("{}|{}|{}|{}|{}", "relationship_id", "source", "target", "description",
                      pl.col("strength").round(1))), "row", "row_tokens", tokenizer)
    encode = ctx.models.embedder.encode
    entity_vectors = encode([f"{n}: {d}" for n, d in
                             zip(entities["name"], entities["description"])])
    relationship_vectors = None
    if ctx.config.get("relationship_vectors", True) and not relationships.is_empty():
        relationship_vectors = encode([f"{s} -- {t}: {d}" for s, t, d in relationships.select(
            "source", "target", "description").iter_rows()])
    import networkx as nx  # imported by this step, not by every command

    graph = nx.Graph()
    for name, kind, description in zip(entities["name"], entities["type"],
                                        entities["description"]):
        graph.add_node(name, type=kind, description=description)
    for source, target, description, strength in zip(
            relationships["source"], relationships["target"], relationships["description"],
            relationships["strength"]):
        graph.add_edge(source, target, description=description, strength=float(strength))
    write_skeleton(ctx.out_dir, entities, relationships, entity_vectors, relationship_vectors,
                   graph)
    ctx.notes.update(entities=entities.height, relationships=relationships.height,
                     components=nx.number_connected_components(graph))


def _summarise_descriptions(ctx: StepContext, entities: pl.DataFrame,
                            relationships: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One LLM-written description for every entity and relationship whose
    description joins several chunks' (``kgrag.graphs.descriptions``)."""
    llm, style = ctx.models.llm("summariser"), ctx.config["summarise"]["prompt"]
    of_entities = summarise(llm, entities["name"].to_list(), entities["description"].to_list(),
                            style=style)
    pairs = [f"{s} -- {t}" for s, t in relationships.select("source", "target").iter_rows()]
    of_relationships = summarise(llm, pairs, relationships["description"].to_list(),
                                 style=style)
    ctx.notes.update(summarised_descriptions=of_entities.summarised + of_relationships.summarised,
                     summary_fallbacks=of_entities.fallbacks + of_relationships.fallbacks)
    return (entities.with_columns(description=pl.Series(of_entities.descriptions,
                                                        dtype=pl.String)),
            relationships.with_columns(description=pl.Series(of_relationships.descriptions,
                                                             dtype=pl.String)))
