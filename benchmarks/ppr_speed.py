"""The PPR search's cost: the graph build beyond extraction, and the walk per question.

    python benchmarks/ppr_speed.py specs/graph_search/musique.yaml ppr [--tile 2]

Loads the named ``ppr`` entry of a spec whose extraction has run (``kgrag run`` or
``benchmarks/graph_search.py --run`` first), times the load (graph and seed indexes
built from the extraction's tables: the build beyond extraction), then times one
search per question (linking, walk, the budget fill) and prints nodes, edges, p50 and p95.
``--tile k`` also walks a graph made of k copies of this one side by side (the same
degree distribution at k times the nodes), to time the walk at a size the sample
does not reach; its seeds are each question's seeds, repeated in every copy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.graphs.ppr import Walk
from kgrag.steps.retrieve import load_strategy


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("entry", help="a ppr entry's name (its first budget is used)")
    parser.add_argument("--tile", type=int, default=1, help="also walk k copies side by side")
    args = parser.parse_args(argv)
    session = api.open_session(args.spec)
    step = next(s for s in session.plan.steps if s.kind == "retrieve"
                and s.name.split(".", 1)[1].split("@")[0] == args.entry)
    inputs = {role: session.artefact(name) for role, name in step.inputs.items()}
    started = time.perf_counter()
    strategy = load_strategy(step.config, inputs, session.models)
    build_s = time.perf_counter() - started
    search = strategy.search
    graph = search.graph
    questions = read_questions(session.artefact("corpus"))
    texts = questions["question"].to_list()
    vectors = session.models.embedder_of(step.config["embedder"]).encode(texts)
    times, walks, seeds = [], [], []
    for text, vector in zip(texts, vectors):
        started = time.perf_counter()
        search.walked.clear()  # the cost of a question's first budget
        strategy.retrieve(text, vector)
        times.append((time.perf_counter() - started) * 1000)
        seeds.append(search.seeds(text, vector).nodes)
    n_entities, n_chunks = len(graph.names), len(graph.chunk_ids)
    print(f"{args.spec} / {args.entry}: {n_entities} phrase nodes, {n_chunks} passage nodes, "
          f"{graph.adjacency.nnz // 2} edges; load (graph build beyond extraction) "
          f"{build_s:.2f} s")
    print(f"search per question (link, walk, fill): p50 {statistics.median(times):.1f} ms, "
          f"p95 {percentile(times, 95):.1f} ms over {len(times)} questions")
    if args.tile > 1:
        tiled = sp.block_diag([graph.adjacency] * args.tile, format="csr")
        walk = Walk(tiled)
        size = graph.adjacency.shape[0]
        for nodes in seeds:
            if not nodes:
                continue
            restart = np.zeros(tiled.shape[0])
            for copy in range(args.tile):
                restart[[copy * size + n for n in nodes]] = 1.0
            started = time.perf_counter()
            walk.run(restart, search.damping, max_steps=search.max_iterations)
            walks.append((time.perf_counter() - started) * 1000)
        print(f"walk alone on {args.tile} copies ({args.tile * n_entities} phrase nodes, "
              f"{tiled.nnz // 2} edges): p50 {statistics.median(walks):.1f} ms, "
              f"p95 {percentile(walks, 95):.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
