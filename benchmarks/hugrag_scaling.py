"""HugRAG's LLM-free build stages at full-corpus scale: gate checks versus modules,
and canonicalisation / Leiden time and memory.

    python benchmarks/hugrag_scaling.py                 # biology, business, musique_200
    python benchmarks/hugrag_scaling.py --fractions 0.25 0.5 1

Extracting a whole corpus with the bundled LLM takes hours on 2 cores, so this
benchmark builds a *stand-in* entity graph with the same shape as a capped
extraction and runs the real kgrag code on it:

* entities of a chunk: its 4 most frequent keywords (``kgrag.corpus.keywords``),
  capitalised phrases and terms as the extractor keeps (max_entities 4);
* relationships: those entities joined in a chain (3 per chunk; max 4);
* canonicalisation (rapidfuzz + MiniLM name embeddings), recursive Leiden — the
  code of the ``hierarchy`` step;
* module "summaries": the names of a module's 12 most connected members (the
  ``summarise`` step's LLM call replaced), embedded with MiniLM;
* gates: ``find_gates`` with a stand-in judge (yes when the two summaries'
  cosine ≥ 0.6, about as selective as the small LLM), counting every check.

The figures are the number of checks the top-down pruning makes against the
number of modules N and all N(N−1)/2 pairs, per corpus and prefix fraction, with
the log-log slope of checks against N (1 = linear, 2 = quadratic). Times are
wall seconds of one run each; peak RSS is the process's maximum resident size.
"""

from __future__ import annotations

import argparse
import itertools
import math
import resource
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from kgrag.configuration import default_cache_dir
from kgrag.corpus import chunk_documents, load_corpus
from kgrag.corpus.keywords import keywords
from kgrag.graphs.canonical import Canonical, canonicalise
from kgrag.graphs.gates import GateSearch, find_gates, module_adjacency
from kgrag.graphs.hierarchy import Hierarchy, leiden_hierarchy
from kgrag.graphs.merge import ENTITY_FRAME_SCHEMA, RELATIONSHIP_FRAME_SCHEMA
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.models.embed.embedder import CachedEmbedder

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "biology": {"dataset": "holisqa", "path": "holisqa/biology"},
    "business": {"dataset": "holisqa", "path": "holisqa/business"},
    "musique_200": {"dataset": "musique", "path": "musique_200.jsonl"},
}
ENTITIES_PER_CHUNK = 4
SUMMARY_MEMBERS = 12
JUDGE_COSINE = 0.6


def stand_in_extraction(chunks: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Entity and relationship frames shaped like ``merge.merge``'s output."""
    entities: dict[str, list[str]] = {}
    relationships: dict[tuple[str, str], list[str]] = {}
    for chunk_id, text in zip(chunks["chunk_id"], chunks["text"]):
        names = [w.upper() for w, _ in Counter(keywords(text)).most_common(ENTITIES_PER_CHUNK)]
        for name in names:
            entities.setdefault(name, []).append(chunk_id)
        for a, b in itertools.pairwise(names):
            relationships.setdefault(tuple(sorted((a, b))), []).append(chunk_id)
    entity_frame = pl.DataFrame(
        [{"name": n, "type": "concept", "description": f"{n.lower()} (stand-in)",
          "source_chunk_ids": c, "grounded": True} for n, c in sorted(entities.items())],
        schema=ENTITY_FRAME_SCHEMA)
    relationship_frame = pl.DataFrame(
        [{"source": a, "target": b, "description": f"{a} with {b}", "strength": 5.0,
          "weight": 5 * len(c), "source_chunk_ids": c, "grounded": True}
         for (a, b), c in sorted(relationships.items())], schema=RELATIONSHIP_FRAME_SCHEMA)
    return entity_frame, relationship_frame


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class StandIn:
    """The stand-in build: canonical entities, hierarchy, module summaries, gate search."""

    canon: Canonical
    hierarchy: Hierarchy
    summaries: dict[str, str]  # module id → member names
    module_vectors: np.ndarray  # rows in ``summaries`` order
    search: GateSearch
    canonicalise_s: float
    leiden_s: float


def stand_in_build(chunks: pl.DataFrame, embedder: CachedEmbedder) -> StandIn:
    entities, relationships = stand_in_extraction(chunks)
    started = time.perf_counter()
    canon = canonicalise(entities, relationships, embedder.encode)
    canonicalise_s = time.perf_counter() - started
    rels = canon.relationships
    started = time.perf_counter()
    hierarchy = leiden_hierarchy(
        canon.entities["name"].to_list(),
        list(zip(rels["source"], rels["target"], rels["weight"].cast(pl.Float64))))
    leiden_s = time.perf_counter() - started
    degree = Counter([*rels["source"], *rels["target"]])
    summaries = {m.module_id: ", ".join(sorted(m.entities, key=lambda n: (-degree[n], n))
                                         [:SUMMARY_MEMBERS]).lower()
                 for m in hierarchy.modules}
    matrix = embedder.encode(list(summaries.values()))
    vectors = dict(zip(summaries, matrix / np.linalg.norm(matrix, axis=1, keepdims=True)))
    search = find_gates(hierarchy, vectors,
                        module_adjacency(hierarchy, zip(rels["source"], rels["target"])),
                        lambda pairs: [float(vectors[a] @ vectors[b]) >= JUDGE_COSINE
                                       for a, b in pairs])
    return StandIn(canon, hierarchy, summaries, matrix, search, canonicalise_s, leiden_s)


def one_build(chunks: pl.DataFrame, embedder: CachedEmbedder) -> dict[str, float]:
    built = stand_in_build(chunks, embedder)
    search = built.search
    return {"chunks": chunks.height, "entities": built.canon.entities.height,
            "edges": built.canon.relationships.height, "modules": len(built.hierarchy.modules),
            "levels": len(built.hierarchy.levels()), "checks": search.checks,
            "candidates": search.candidates, "pruned": search.skipped_by_pruning,
            "gates": len(search.gates), "all_pairs": search.all_pairs,
            "canonicalise_s": built.canonicalise_s, "leiden_s": built.leiden_s,
            "peak_rss_mb": peak_rss_mb()}


def slope(xs: list[float], ys: list[float]) -> float:
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pairs) < 2:
        return float("nan")
    return float(np.polyfit([p[0] for p in pairs], [p[1] for p in pairs], 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0])
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    args = parser.parse_args()
    cache = CallCache(default_cache_dir())
    tokenizer, embedder = bundled_embedder(cache)
    header = ("corpus", "fraction", "chunks", "entities", "edges", "modules", "levels",
              "checks", "candidates", "pruned", "gates", "all_pairs", "canonicalise_s",
              "leiden_s", "peak_rss_mb")
    print("  ".join(header))
    fits = {}
    all_modules, all_checks = [], []
    for name in args.corpora:
        cfg = {**CORPORA[name], "limit": None, "questions": None,
               "fields": {"id": "id", "title": "title", "text": "text"}}
        corpus = load_corpus(cfg, SHARED_DATA)
        chunks = chunk_documents(corpus.documents, tokenizer, 256, 32)
        rows = []
        for fraction in args.fractions:
            row = one_build(chunks.head(max(1, int(fraction * chunks.height))), embedder)
            rows.append(row)
            cells = [name, f"{fraction:g}", *(f"{row[k]:.2f}" if isinstance(row[k], float)
                                               else str(row[k]) for k in header[2:])]
            print("  ".join(cells), flush=True)
        fits[name] = slope([r["modules"] for r in rows], [r["checks"] for r in rows])
        all_modules += [r["modules"] for r in rows]
        all_checks += [r["checks"] for r in rows]
    for name, value in fits.items():
        print(f"log-log slope of checks vs modules, {name}: {value:.2f}")
    print(f"log-log slope of checks vs modules, all points: {slope(all_modules, all_checks):.2f}"
          " (all pairs: 2.00)")
    cache.close()


if __name__ == "__main__":
    main()
