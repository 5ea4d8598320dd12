"""BM25 and PPR per question as the corpus grows: a real graph and index tiled k times.

    PYTHONPATH=. python benchmarks/sparse_scale.py specs/reader/musique.yaml ppr \\
        [--tiles 1 10 100 300] [--push 1e-5] [--push-only] [--ann ivf_hnsw_sq] [--fusion]

Loads the named ``ppr`` entry of a spec whose nlp extraction has run (its graph, dense
index and chunks), and a BM25 index (``Bm25Index``) of the same chunks. Building a
million chunks' extraction here takes hours, so larger sizes are a simulation: k copies
of the real graph and index side by side, with renamed ids. The graph's entity block and
chunk block are each tiled (entities of every copy first, then chunks, the layout
``PprSearch`` walks), the chunk vectors repeated, and BM25's term–document matrix
stacked (every posting list k times longer, the idf unchanged). A question's names link
to the first copy; every copy is walked. Per size it prints nodes, edges, the load
(transition built from the tiled adjacency), and the p50/p95 of a ppr question's
context at the entry's budget, each question walked afresh: filled from the whole ranking
(``PprSearch.scored``, every chunk sorted and named, what ``retrieve`` did before and what
fusion reads) and as ``PprStrategy.retrieve`` fills it (the ranking sorted only as far as
the fill reads it), the two contexts, traces included, checked to be the same; and of BM25: its context at the ppr entry's budget (``Bm25Strategy.retrieve``, the
ranking sorted only as far as the fill reads it), the same context filled from the
whole ranking (``Bm25Index.ranked``, what the strategy did before, and what fusion
reads; the two contexts are checked to be the same), questions embedded beforehand
(add the embedder's ~10 ms). With ``--push ε``, also the same search with
``walk: push`` at ε, the same questions in the same process, and the push walk's own
p50 (``PprSearch._walk``: the rest is the dense product, linking and the fill);
``--push-only`` leaves the power walk out (it takes seconds a question at 300
copies). With ``--ann INDEX`` (and ``--push``), also the push walk over the tiled chunk
vectors written to a LanceDB table with that ANN index (``benchmarks/ann.py``'s
settings, the schema's defaults), the same questions in the same process: ppr then reads
the index's nearest chunks and no product with every chunk
(``kgrag.retrieval.dense_scores``); it prints the table's build seconds, the context's
p50/p95 and the share of questions whose first five context chunks are the flat push's.
An index over exact copies would rank a chunk's copies together, so with ``--ann`` the
copies' vectors (both searches') carry ``benchmarks/ann.py``'s noise (``--noise``).
With ``--fusion``, also the fusion of dense and BM25 (``fuse: [dense, bm25]``,
k = 60, at the entry's budget; works with ``--bm25-only``): its context as
``FusionStrategy.retrieve`` fills it (BM25 read only as deep as the fill needs) and the
same context from both whole rankings fused in one dict (what fusion did before), the
two checked to be the same; the dense member's top k (``NaiveStrategy``'s default k) is
a flat product over the tiled chunk vectors, computed beforehand and not timed (the
dense search is timed by ``benchmarks/ann.py``). The machine is shared, so times are
upper bounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import tempfile
import time
from copy import copy as shallow
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchmarks.ann import INDEXES, settings, tiled
from kgrag import api
from kgrag.contents.corpus import read_questions
from kgrag.contents.dense import MATRIX_FILE, MatrixRows
from kgrag.graphs.ppr import Walk
from kgrag.retrieval.bm25 import Bm25Index, Bm25Strategy
from kgrag.retrieval.budget import best
from kgrag.retrieval.fusion import FusionStrategy
from kgrag.retrieval.ppr import PprStrategy
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.units import Evidence, Units
from kgrag.retrieval.walked import WalkMemo
from kgrag.steps.retrieve import load_strategy
from kgrag.store.vectors import VectorTable


def tiled_search(search: PprSearch, k: int) -> PprSearch:
    """``search`` over k disjoint copies of its graph and chunk vectors."""
    graph = search.graph
    n = len(graph.names)
    a = graph.adjacency
    eye = sp.identity(k, format="csr")
    blocks = [[sp.kron(eye, a[:n, :n]), sp.kron(eye, a[:n, n:])],
              [sp.kron(eye, a[n:, :n]), sp.kron(eye, a[n:, n:])]]
    tiled = dataclasses.replace(
        graph, names=[f"{name}#{c}" if c else name for c in range(k) for name in graph.names],
        chunk_ids=[f"{i}#{c}" if c else i for c in range(k) for i in graph.chunk_ids],
        adjacency=sp.bmat(blocks, format="csr"), mentions=np.tile(graph.mentions, k))
    copy = object.__new__(PprSearch)
    copy.__dict__.update({k: v for k, v in search.__dict__.items() if k not in ("position", "chunk_array")})
    copy.graph, copy.walk = tiled, Walk(tiled.adjacency)
    copy.chunk_matrix, copy.walked = np.tile(search.chunk_matrix, (k, 1)), WalkMemo()
    return copy


def tiled_units(units: Units, k: int) -> Units:
    """k copies of ``units``, renamed as ``tiled_bm25`` renames them."""
    def tiled(column: dict) -> dict:
        return {f"{i}#{c}" if c else i: v for c in range(k) for i, v in column.items()}
    return Units(tiled(units.text), tiled(units.tokens), tiled(units.doc))


def tiled_bm25(index: Bm25Index, units: Units, k: int) -> Bm25Index:
    """``index`` over k copies of its units (``units``, tiled): its term–document matrix
    stacked k times."""
    scores = index.index.scores
    matrix = sp.csc_matrix((scores["data"], scores["indices"], scores["indptr"]),
                           shape=(scores["num_docs"], len(scores["indptr"]) - 1))
    stacked = sp.vstack([matrix] * k, format="csc")
    copy = object.__new__(Bm25Index)
    copy.__dict__.update(index.__dict__)
    copy.index = object.__new__(type(index.index))
    copy.index.__dict__.update(index.index.__dict__)
    copy.index.scores = {**scores, "data": stacked.data, "indices": stacked.indices,
                         "indptr": stacked.indptr, "num_docs": stacked.shape[0]}
    copy.ids = [f"{i}#{c}" if c else i for c in range(k) for i in index.ids]
    copy.id_array = np.array(copy.ids, dtype=object)
    copy.tokens, copy.sizes = units.tokens, np.tile(index.sizes, k)
    copy.__dict__.pop("position", None)  # the untiled ids' positions, if fusion read them
    return copy


def whole_ranking_context(strategy: Bm25Strategy, question: str) -> Evidence:
    """The context as the strategy filled it before: from its whole ranking."""
    return strategy.units.filled(strategy.index.ranked(question), strategy.budget)


def whole_ranking_ppr(strategy: PprStrategy, question: str, vector: np.ndarray) -> Evidence:
    """The context as ppr filled it before: from the whole ranking (``scored``), every
    chunk sorted by dense similarity and named, and the trace as ``retrieve`` writes it."""
    strategy.search.walked.clear()  # a question's first walk, as ``retrieve`` is timed
    ranked, scores, trace = strategy.search.scored(question, vector)
    context = strategy.units.filled(ranked, strategy.budget)
    trace["scores"] = {c: round(scores.get(c, 0.0), 8) for c in context.unit_ids}
    if "reached" in trace:
        trace["subgraph"] = strategy.search.subgraph([*trace["seeds"], *trace["reached"]],
                                                     context.unit_ids)
    return dataclasses.replace(context, trace=trace)


def first_context(strategy: PprStrategy, question: str, vector: np.ndarray) -> Evidence:
    """``strategy.retrieve`` of a question not walked before."""
    strategy.search.walked.clear()
    return strategy.retrieve(question, vector)


def ppr_times(strategy: PprStrategy, texts: list[str], vectors: np.ndarray) -> str:
    """p50 and p95 of ppr's context filled from the whole ranking, then as ``retrieve``
    fills it (the ranking sorted only as far as the fill reads it), after checking that
    the two contexts (chunks and trace) are the same for every question."""
    for text, vector in zip(texts, vectors):
        if first_context(strategy, text, vector) != whole_ranking_ppr(strategy, text, vector):
            raise SystemExit(f"a ppr context differs from the whole ranking's: {text!r}")
    wholes = timed(whole_ranking_ppr, [(strategy, t, v) for t, v in zip(texts, vectors)])
    contexts = timed(first_context, [(strategy, t, v) for t, v in zip(texts, vectors)])
    return "  ".join(f"{statistics.median(ms):.0f}  {np.percentile(ms, 95):.0f}"
                     for ms in (wholes, contexts))


def indexed(search: PprSearch, index: str, folder: Path) -> tuple[PprSearch, float]:
    """``search`` reading its chunk vectors through a LanceDB table in ``folder`` with an
    ``index`` ANN index, and the seconds the table and its index took to build."""
    started = time.perf_counter()
    table = VectorTable.create(folder, "chunks", search.graph.chunk_ids, search.chunk_matrix,
                               {**settings(index), "min_rows": 0})
    build = time.perf_counter() - started
    copy = shallow(search)
    # over an index the search reads the rows it needs from the matrix file, as a dense
    # artefact's (``kgrag.contents.dense.MatrixRows``)
    np.save(folder / MATRIX_FILE, np.asarray(search.chunk_matrix, dtype=np.float32))
    copy.index, copy.walked = table, WalkMemo()
    copy.chunk_matrix = MatrixRows(folder / MATRIX_FILE)
    return copy, build


def ann_times(strategy: PprStrategy, flat: PprStrategy, texts: list[str],
              vectors: np.ndarray) -> str:
    """p50 and p95 of ppr's context read through the index (each question's first walk),
    and the share of questions whose first five chunks are those of ``flat``'s context."""
    same = statistics.mean(
        first_context(strategy, t, v).unit_ids[:5] == first_context(flat, t, v).unit_ids[:5]
        for t, v in zip(texts, vectors))
    ms = timed(first_context, [(strategy, t, v) for t, v in zip(texts, vectors)])
    return f"{statistics.median(ms):.0f}  {np.percentile(ms, 95):.0f}  {same:.2f}"


class DenseTop:
    """The dense member of a fusion: each question's top k chunks, found beforehand."""

    def __init__(self, top: dict[str, list[str]]) -> None:
        self.top = top

    def ranking(self, question: str, vector: np.ndarray | None) -> list[str]:
        return self.top[question]


def whole_fusion(rankings: list[list[str]], k: int) -> list[str]:
    """Reciprocal-rank fusion as it was done before: every member's whole ranking summed
    into one dict and sorted (ties in the order the members first name a unit)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, unit in enumerate(ranking, start=1):
            scores[unit] = scores.get(unit, 0.0) + 1.0 / (k + rank)
    first_seen = {unit: i for i, unit in enumerate(scores)}
    return sorted(scores, key=lambda unit: (-scores[unit], first_seen[unit]))


def fusion_times(lexical: Bm25Strategy, chunk_ids: list[str], matrix: np.ndarray,
                 texts: list[str], vectors: np.ndarray) -> str:
    """p50 and p95 of the fusion of dense and BM25 as ``FusionStrategy.retrieve`` fills
    it, then filled from both whole rankings fused in one dict, after checking that the
    two contexts are the same for every question. ``matrix``'s rows are ``chunk_ids``'
    vectors; each question's dense top k is their product with it, not timed."""
    units, budget = lexical.units, lexical.budget
    typical = max(1, int(statistics.median(units.tokens.values())))
    top_k = 2 * math.ceil(budget / typical) + 10  # NaiveStrategy's default
    ids, rows = np.array(chunk_ids, dtype=object), np.arange(len(chunk_ids))
    dense = DenseTop({text: ids[best(matrix @ vector.astype(np.float32), rows, top_k)[0]]
                      .tolist() for text, vector in zip(texts, vectors)})
    fusion = FusionStrategy([dense, lexical], units, budget, 60)

    def whole(text: str) -> Evidence:
        rankings = [dense.ranking(text, None), lexical.index.ranked(text)]
        return units.filled(whole_fusion(rankings, 60), budget)

    for text in texts:
        if fusion.retrieve(text, None) != whole(text):
            raise SystemExit(f"a fusion context differs from the whole rankings': {text!r}")
    contexts = timed(fusion.retrieve, [(t, None) for t in texts])
    wholes = timed(whole, [(t,) for t in texts])
    return "  ".join(f"{statistics.median(ms):.1f}  {np.percentile(ms, 95):.1f}"
                     for ms in (contexts, wholes))


def built(session: api.Session, name: str) -> Path:
    """The step's artefact, or else the newest build of a step of that name (one built
    by an older version of the code: the graph is as real, and this is a timing)."""
    folder = session.artefact(name)
    if folder.exists():
        return folder
    older = sorted(folder.parent.glob(f"{name}-*"), key=lambda p: p.stat().st_mtime)
    if not older:
        raise SystemExit(f"{name} has not been built: run the spec first")
    print(f"{name}: using {older[-1].name}")
    return older[-1]


def timed(run, items) -> list[float]:
    times = []
    for item in items:
        started = time.perf_counter()
        run(*item)
        times.append((time.perf_counter() - started) * 1000)
    return times


def stopwatch(call, times: list[float]):
    """``call``, appending the milliseconds of each call to ``times``."""
    def timed_call(*args):
        started = time.perf_counter()
        result = call(*args)
        times.append((time.perf_counter() - started) * 1000)
        return result
    return timed_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("entry", help="a ppr entry's name")
    parser.add_argument("--tiles", type=int, nargs="+", default=[1, 10, 100, 300])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--bm25-only", action="store_true",
                        help="time BM25 alone (the walk at 300 copies takes minutes)")
    parser.add_argument("--push", type=float, metavar="EPSILON",
                        help="also time the push walk (walk: push) at this push_epsilon")
    parser.add_argument("--push-only", action="store_true",
                        help="time the push walk and BM25, not the power walk")
    parser.add_argument("--ann", choices=INDEXES,
                        help="also time the push walk reading an ANN index of this type")
    parser.add_argument("--noise", type=float, default=0.02,
                        help="with --ann, the noise on the copies' vectors (benchmarks/ann.py)")
    parser.add_argument("--fusion", action="store_true",
                        help="also time the fusion of dense and BM25 (fuse: [dense, bm25])")
    args = parser.parse_args()
    session = api.open_session(args.spec)
    step = next(s for s in session.plan.steps if s.kind == "retrieve"
                and s.name.split(".", 1)[1].split("@")[0] == args.entry)
    inputs = {role: built(session, name) for role, name in step.inputs.items()}
    strategy = load_strategy(step.config, inputs, session.models)
    search = strategy.search
    if isinstance(search.chunk_matrix, MatrixRows):
        raise SystemExit("the spec's dense artefact has an ANN index: this benchmark tiles a "
                         "flat build's matrix (below dense_index.ann.min_rows); --ann indexes "
                         "the tiled copies itself")
    bm25 = Bm25Index(strategy.units)
    texts = read_questions(built(session, "corpus"))["question"].to_list()[: args.questions]
    vectors = session.models.embedder_of(step.config["embedder"]).encode(texts)
    if (args.push_only or args.ann) and args.push is None:
        raise SystemExit("--push-only and --ann need --push EPSILON")
    budget = strategy.budget
    print("copies  chunks  nodes  edges  load_s  ppr_p50  ppr_p95  ppr_context_p50  "
          "ppr_context_p95  bm25_p50  bm25_p95  whole_ranking_p50  whole_ranking_p95"
          + ("  push_p50  push_p95  push_context_p50  push_context_p95  push_walk_p50"
             if args.push else "")
          + ("  ann_build_s  ann_context_p50  ann_context_p95  ann_same_top5" if args.ann
             else "")
          + ("  fusion_p50  fusion_p95  whole_fusion_p50  whole_fusion_p95"
             if args.fusion else ""))
    for k in args.tiles:
        units = tiled_units(strategy.units, k) if k > 1 else strategy.units
        words = tiled_bm25(bm25, units, k) if k > 1 else bm25
        lexical = Bm25Strategy(words, units, budget)
        contexts = timed(lexical.retrieve, [(t, None) for t in texts])
        wholes = timed(whole_ranking_context, [(lexical, t) for t in texts])
        bm25_times = "  ".join(f"{statistics.median(ms):.1f}  {np.percentile(ms, 95):.1f}"
                               for ms in (contexts, wholes))
        if any(lexical.retrieve(t, None) != whole_ranking_context(lexical, t) for t in texts):
            raise SystemExit(f"{k} copies: a BM25 context differs from the whole ranking's")
        fusion = ""
        if args.fusion:
            chunk_ids = [f"{i}#{c}" if c else i for c in range(k) for i in search.graph.chunk_ids]
            matrix = np.tile(search.chunk_matrix, (k, 1)) if k > 1 else search.chunk_matrix
            fusion = f"  {fusion_times(lexical, chunk_ids, matrix, texts, vectors)}"
            del matrix
        if args.bm25_only:
            print(f"{k}  {len(words.ids)}  -  -  -  -  -  -  -  {bm25_times}"
                  + ("  -  -  -  -  -" if args.push else "") + fusion, flush=True)
            continue
        started = time.perf_counter()
        big = tiled_search(search, k) if k > 1 else search
        if args.ann:  # copies as distinct passages, for the flat walks and the index alike
            big = shallow(big)
            big.chunk_matrix, big.walked = tiled(search.chunk_matrix, len(big.graph.chunk_ids),
                                                 args.noise, 0), WalkMemo()
        load = time.perf_counter() - started
        power = "-  -  -  -"
        if not args.push_only:
            power = ppr_times(PprStrategy(big, units, budget), texts, vectors)
        push = ""
        if args.push:
            local = shallow(big)
            local.push_epsilon, local.walked = args.push, WalkMemo()
            walk_ms: list[float] = []
            local._walk = stopwatch(local._walk, walk_ms)
            push = f"  {ppr_times(PprStrategy(local, units, budget), texts, vectors)}"
            push += f"  {statistics.median(walk_ms):.1f}"
        if args.ann:
            with tempfile.TemporaryDirectory(dir=Path.home()) as folder:
                near, build = indexed(big, args.ann, Path(folder))
                near.push_epsilon = args.push
                push += f"  {build:.0f}  " + ann_times(PprStrategy(near, units, budget),
                                                       PprStrategy(local, units, budget),
                                                       texts, vectors)
        graph = big.graph
        print(f"{k}  {len(graph.chunk_ids)}  {graph.adjacency.shape[0]}  "
              f"{graph.adjacency.nnz // 2}  {load:.1f}  {power}  {bm25_times}{push}{fusion}",
              flush=True)


if __name__ == "__main__":
    main()
