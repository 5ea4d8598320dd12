"""HugRAG's gate A/B (App. E) on a whole HolisQA domain with the stand-in graph.

    python benchmarks/hugrag_gates_ab.py                  # biology, all 421 questions
    python benchmarks/hugrag_gates_ab.py --domain business --budget 1000

The bundled LLM cannot extract a whole domain in a session, so the graph is the
stand-in of ``hugrag_scaling.py`` (4 keyword entities per chunk in a chain,
canonicalised, recursive Leiden, member-name summaries, gates by a cosine judge).
On it, every question runs ``hugrag``'s real seeding and gated expansion (the
``kgrag.retrieval.hugrag.search`` code, no LLM filter: structural metrics look at what the expansion
reached) twice, with and without gate edges, and the App. E metrics compare them
on the same questions: reachability, gold-node coverage and min hops (over the
questions reachable both ways). Gold nodes are entities whose name occurs in a
gold sentence.
"""

from __future__ import annotations

import argparse

import polars as pl
from hugrag_scaling import SHARED_DATA, stand_in_build

from kgrag.configuration import default_cache_dir
from kgrag.corpus import chunk_documents, load_corpus
from kgrag.eval.structure import gold_nodes, structural_metrics
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.retrieval.hugrag.graph import EDGE_TYPES, HugragGraph
from kgrag.retrieval.hugrag.search import expand, hybrid_scores, mmr
from kgrag.retrieval.units import Units

WEIGHTS = {"gate": 1.2, "structural": 1.0, "membership": 1.0, "relationship": 0.8}


def build(domain: str, embedder, tokenizer) -> tuple[HugragGraph, dict, pl.DataFrame, dict]:
    cfg = {"dataset": "holisqa", "path": f"holisqa/{domain}", "limit": None, "questions": None,
           "fields": {"id": "id", "title": "title", "text": "text"}}
    corpus = load_corpus(cfg, SHARED_DATA)
    chunks = chunk_documents(corpus.documents, tokenizer, 256, 32)
    built = stand_in_build(chunks, embedder)
    canon, hierarchy = built.canon, built.hierarchy
    entity_text = [f"{n}: {d}" for n, d in zip(canon.entities["name"],
                                               canon.entities["description"])]
    entities = canon.entities.with_columns(
        text=pl.Series(entity_text), tokens=pl.Series(tokenizer.count_many(entity_text)),
        chunk_ids=pl.col("source_chunk_ids"),
        module_id=pl.Series([hierarchy.leaf_module_of(n) for n in canon.entities["name"]],
                            dtype=pl.String))
    summaries = list(built.summaries.values())
    modules = pl.DataFrame({
        "module_id": list(built.summaries),
        "parent": pl.Series([hierarchy.module(m).parent for m in built.summaries],
                            dtype=pl.String),
        "text": summaries, "tokens": tokenizer.count_many(summaries)})
    relationships = canon.relationships.with_columns(
        relationship_id=pl.format("R{}", pl.int_range(1, pl.len() + 1)),
        text=pl.format("{} -- {}: {}", "source", "target", "description"), tokens=pl.lit(8))
    chunk_ids = chunks["chunk_id"].to_list()
    units = Units(dict(zip(chunk_ids, chunks["text"])), dict(zip(chunk_ids, chunks["n_tokens"])),
                  dict(zip(chunk_ids, chunks["doc_id"])))
    graph = HugragGraph.assemble(
        entities, embedder.encode(entity_text), relationships, modules, built.module_vectors,
        built.search.gates, chunk_ids, embedder.encode(chunks["text"].to_list()), units)
    gates = built.search
    stats = {"chunks": chunks.height, "entities": entities.height,
             "edges": relationships.height,
             "modules": len(hierarchy.modules), "gates": len(gates.gates),
             "checks": gates.checks, "all_pairs": gates.all_pairs}
    return graph, stats, corpus.questions, dict(zip(corpus.sentences["sentence_id"],
                                                    corpus.sentences["text"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", default="biology", choices=["biology", "business"])
    parser.add_argument("--budget", type=int, default=1000)
    args = parser.parse_args()
    cache = CallCache(default_cache_dir())
    tokenizer, embedder = bundled_embedder(cache)
    graph, stats, questions, sentence_text = build(args.domain, embedder, tokenizer)
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    names = [n.key for n in graph.nodes if n.kind == "entity"]
    vectors = embedder.encode(questions["question"].to_list())
    traces, golds = [], []
    everything = frozenset(EDGE_TYPES)
    for question, vector, gold_ids in zip(questions["question"], vectors,
                                          questions["gold_sentence_ids"]):
        scores = hybrid_scores(graph, question, vector, 0.7)
        seeds = mmr(graph, scores, "entity", 3, 0.7) + mmr(graph, scores, "module", 3, 0.7)
        trace = {}
        for key, allowed in (("reached", everything),
                             ("reached_without_gates", everything - {"gate"})):
            chosen = expand(graph, seeds, scores, args.budget, weights=WEIGHTS, decay=0.7,
                            max_hops=5, fan_out=5, allowed=allowed).chosen
            trace[key] = {graph.nodes[i].key: h for i, h in chosen.items()
                          if graph.nodes[i].kind == "entity"}
        traces.append(trace)
        golds.append(gold_nodes(names, [sentence_text[s] for s in gold_ids]))
    for key, value in structural_metrics(traces, golds).items():
        print(f"{key}: {value}")
    cache.close()


if __name__ == "__main__":
    main()
