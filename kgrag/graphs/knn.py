"""The KNN chunk graph of KET-RAG (Alg. 3, lines 2-7).

Each chunk is linked to K/2 *lexical* neighbours (the chunks sharing the most
keywords, see ``kgrag.corpus.keywords``) and to K/2 *semantic* neighbours (the
highest cosine similarity among the chunks not already chosen lexically). The
graph is undirected and unweighted, like the authors' ``nx.Graph``: an edge
exists when either end chose the other, and a pair that is both a lexical and
a semantic neighbour still gives a single edge of weight 1. PageRank on this
graph picks the core chunks (``kgrag.graphs.core``).

Choices the paper leaves open:

* A lexical neighbour must share at least one keyword. A chunk with fewer
  than K/2 overlapping chunks gets fewer lexical edges and its empty slots are
  not filled. Otherwise zero-overlap ties, broken by index, would all point
  at the first chunks of the corpus and inflate their PageRank.
* Ties are broken by the lower chunk index, for lexical counts (which tie
  often) and for cosines (which tie exactly for duplicate texts), so the
  graph is a pure function of its inputs.
* Vectors are re-normalised here, so any embedding gives true cosines.

Cost: both similarities are computed exactly, in blocks of rows. For each
block, the sparse product ``X_block @ X.T`` gives shared-keyword counts and
``V_block @ V.T`` gives cosines. The top entries are picked per row and the
block is discarded, so memory stays at a few block-sized arrays (about
``_BLOCK_ELEMENTS`` entries each) whatever n is. Time is quadratic. The
cosines cost O(n²·d) flops. The sparse product costs the sum, over keywords,
of their squared document frequency. On two CPU cores this is fine at the
thousands to tens of thousands of chunks of the KET-RAG benchmarks (seconds; see
``benchmarks/ket_graphs.py``). The dense cosine product is the largest part; no approximate
index is needed at these sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kgrag.corpus.keywords import keyword_matrix
from kgrag.errors import KgragError

if TYPE_CHECKING:
    import scipy.sparse as sp

# Entries per dense score block (4 Mi: 16 MB of float32 cosines or int32 counts); the
# peak adds the sparse product of one block, a few tens of MB more at n = 20,000.
_BLOCK_ELEMENTS = 1 << 22


def knn_graph(texts: Sequence[str], vectors: np.ndarray, k: int) -> sp.csr_matrix:
    """Return the symmetric, unweighted n × n KNN graph of the chunks (no self loops).

    ``texts`` and ``vectors`` describe the same n chunks in the same order. ``k``
    is the paper's K (even, at least 2): every chunk picks up to K/2 lexical
    and K/2 semantic neighbours, so its degree is at least min(K/2, n - 1).
    Entries are float64 ones, ready for ``kgrag.graphs.core.pagerank``.
    """
    import scipy.sparse as sp  # imported where a sparse matrix is made, not by every command

    n = len(texts)
    if k < 2 or k % 2:
        raise KgragError(f"the KNN graph needs an even K >= 2, got K={k}")
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != n:
        raise KgragError(
            f"the KNN graph needs one vector per chunk: {n} texts but vectors of shape "
            f"{vectors.shape}"
        )
    half = min(k // 2, n - 1)
    if half < 1:
        return sp.csr_matrix((n, n), dtype=np.float64)
    incidence, _ = keyword_matrix(texts)
    incidence_t = incidence.T.tocsr()
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    block = max(1, _BLOCK_ELEMENTS // n)
    sources: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    for start in range(0, n, block):
        stop = min(start + block, n)
        lex_rows, lex_cols = _lexical_block(incidence[start:stop], incidence_t, start, half)
        sem_rows, sem_cols = _semantic_block(unit, start, stop, lex_rows, lex_cols, half)
        sources += [lex_rows + start, sem_rows + start]
        targets += [lex_cols, sem_cols]
    rows, cols = np.concatenate(sources), np.concatenate(targets)
    directed = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    graph = (directed + directed.T).tocsr()
    graph.data[:] = 1.0
    graph.sort_indices()
    return graph


def _lexical_block(
    incidence: sp.csr_matrix, incidence_t: sp.csr_matrix, start: int, half: int
) -> tuple[np.ndarray, np.ndarray]:
    """Pick the lexical neighbours of one block of rows (local row, global column).

    Scores are shared-keyword counts; a count of 0 never makes a neighbour.
    """
    counts = (incidence @ incidence_t).toarray()
    local = np.arange(counts.shape[0])
    counts[local, local + start] = 0
    return _top_per_row(counts, half, floor=0)


def _semantic_block(
    unit: np.ndarray, start: int, stop: int, lex_rows: np.ndarray, lex_cols: np.ndarray,
    half: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Pick the semantic neighbours of rows ``start:stop``, skipping self and lexical picks."""
    cosines = unit[start:stop] @ unit.T
    local = np.arange(stop - start)
    cosines[local, local + start] = -np.inf
    cosines[lex_rows, lex_cols] = -np.inf
    return _top_per_row(cosines, half, floor=-np.inf)


def _top_per_row(scores: np.ndarray, m: int, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Return (row, column) of the ``m`` highest scores above ``floor`` in each row.

    ``m`` passes of ``argmax`` pick the best remaining entry of every row and
    then overwrite it with ``floor``. ``argmax`` returns the first maximum, so
    ties go to the lower column, exactly and deterministically. m = K/2 is
    small, and a vectorised ``argmax`` pass is far cheaper than the
    introselect of ``np.partition`` on long rows. A row with fewer than m
    entries above ``floor`` yields fewer. ``scores`` is overwritten.
    """
    local = np.arange(scores.shape[0])
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for _ in range(m):
        best = scores.argmax(axis=1)
        found = scores[local, best] > floor
        rows.append(local[found])
        cols.append(best[found])
        scores[local, best] = floor
    return np.concatenate(rows), np.concatenate(cols)
