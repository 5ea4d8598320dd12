"""HugRAG's gate A/B (App. E) on a whole HolisQA domain with the stand-in graph.

    python benchmarks/hugrag_gates_ab.py                  # biology, all 421 questions
    python benchmarks/hugrag_gates_ab.py --domain business --budget 1000

The bundled LLM cannot extract a whole domain in a session, so the graph is the
stand-in of ``hugrag_scaling.py`` (4 keyword entities per chunk in a chain,
canonicalised, recursive Leiden, member-name summaries, gates by a cosine judge).
On it, every question runs ``hugrag``'s real seeding and gated expansion (the
``HugragGraph`` code, no LLM filter: structural metrics look at what the expansion
reached) twice, with and without gate edges, and the App. E metrics compare them
on the same questions: reachability, gold-node coverage and min hops (over the
questions reachable both ways). Gold nodes are entities whose name occurs in a
gold sentence.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
import polars as pl
from hugrag_scaling import JUDGE_COSINE, SHARED_DATA, SUMMARY_MEMBERS, stand_in_extraction

from kgrag.corpus import chunk_documents, load_corpus
from kgrag.eval.structure import gold_nodes, structural_metrics
from kgrag.graphs.canonical import canonicalise
from kgrag.graphs.gates import find_gates, module_adjacency
from kgrag.graphs.hierarchy import leiden_hierarchy
from kgrag.models import bundled_embedder
from kgrag.models.cache import CallCache
from kgrag.retrieval.hugrag import EDGE_TYPES, HugragGraph, Node, keyword_lexicon
from kgrag.spec.model import default_cache_dir

WEIGHTS = {"gate": 1.2, "structural": 1.0, "membership": 1.0, "relationship": 0.8}


def build(domain: str, embedder, tokenizer) -> tuple[HugragGraph, dict, pl.DataFrame, dict]:
    cfg = {"dataset": "holisqa", "path": f"holisqa/{domain}", "limit": None, "questions": None,
           "fields": {"id": "id", "title": "title", "text": "text"}}
    corpus = load_corpus(cfg, SHARED_DATA)
    chunks = chunk_documents(corpus.documents, tokenizer, 256, 32)
    entities, relationships = stand_in_extraction(chunks)
    canon = canonicalise(entities, relationships, embedder.encode)
    entities, rels = canon.entities, canon.relationships
    hierarchy = leiden_hierarchy(entities["name"].to_list(),
                                 list(zip(rels["source"], rels["target"],
                                          rels["weight"].cast(pl.Float64))))
    degree = Counter([*rels["source"], *rels["target"]])
    summary = {m.module_id: ", ".join(sorted(m.entities, key=lambda n: (-degree[n], n))
                                      [:SUMMARY_MEMBERS]).lower() for m in hierarchy.modules}
    module_ids = list(summary)
    module_vectors = embedder.encode([summary[m] for m in module_ids])
    unit = dict(zip(module_ids, module_vectors / np.linalg.norm(module_vectors, axis=1,
                                                                keepdims=True)))
    gates = find_gates(hierarchy, unit, module_adjacency(hierarchy, zip(rels["source"],
                                                                        rels["target"])),
                       lambda a, b: float(unit[a] @ unit[b]) >= JUDGE_COSINE)
    entity_text = [f"{n}: {d}" for n, d in zip(entities["name"], entities["description"])]
    nodes = [Node("entity", n, t, k) for n, t, k in
             zip(entities["name"], entity_text, tokenizer.count_many(entity_text))]
    nodes += [Node("module", m, summary[m], k) for m, k in
              zip(module_ids, tokenizer.count_many([summary[m] for m in module_ids]))]
    nodes += [Node("chunk", c, t, k) for c, t, k in
              zip(chunks["chunk_id"], chunks["text"], chunks["n_tokens"])]
    vectors = np.concatenate([embedder.encode(entity_text), module_vectors,
                              embedder.encode(chunks["text"].to_list())]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = {(n.kind, n.key): i for i, n in enumerate(nodes)}
    pairs: list[tuple[int, int, str]] = []
    for a, b in zip(rels["source"], rels["target"]):
        pairs.append((index[("entity", a)], index[("entity", b)], "relationship"))
    for name, sources in zip(entities["name"], entities["source_chunk_ids"]):
        pairs += [(index[("entity", name)], index[("chunk", c)], "structural") for c in sources]
    for m in hierarchy.modules:
        if m.parent is not None:
            pairs.append((index[("module", m.parent)], index[("module", m.module_id)],
                          "membership"))
    for name in entities["name"]:
        leaf = hierarchy.leaf_module_of(name)
        if leaf is not None:
            pairs.append((index[("module", leaf)], index[("entity", name)], "membership"))
    pairs += [(index[("module", a)], index[("module", b)], "gate") for a, b in gates.gates]
    edges: list[list[tuple[int, str]]] = [[] for _ in nodes]
    for a, b, kind in sorted(set(pairs)):
        edges[a].append((b, kind))
        edges[b].append((a, kind))
    rel_frame = rels.with_columns(
        relationship_id=pl.format("R{}", pl.int_range(1, pl.len() + 1)),
        text=pl.format("{} -- {}: {}", "source", "target", "description"), tokens=pl.lit(8))
    lexicon, vocabulary = keyword_lexicon([n.text for n in nodes])
    graph = HugragGraph(nodes, vectors, lexicon, vocabulary, edges, rel_frame,
                        dict(zip(chunks["chunk_id"], chunks["doc_id"])))
    stats = {"chunks": chunks.height, "entities": entities.height, "edges": rels.height,
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
        scores = graph.scores(question, vector, 0.7)
        seeds = graph.mmr(scores, "entity", 3, 0.7) + graph.mmr(scores, "module", 3, 0.7)
        trace = {}
        for key, allowed in (("reached", everything),
                             ("reached_without_gates", everything - {"gate"})):
            chosen, _ = graph.expand(seeds, scores, args.budget, weights=WEIGHTS, decay=0.7,
                                     max_hops=5, fan_out=5, allowed=allowed)
            trace[key] = {graph.nodes[i].key: h for i, h in chosen.items()
                          if graph.nodes[i].kind == "entity"}
        traces.append(trace)
        golds.append(gold_nodes(names, [sentence_text[s] for s in gold_ids]))
    for key, value in structural_metrics(traces, golds).items():
        print(f"{key}: {value}")
    cache.close()


if __name__ == "__main__":
    main()
