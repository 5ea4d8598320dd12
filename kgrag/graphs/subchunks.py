"""Split chunks into 2^τ sub-chunks, the text units KET-RAG retrieves (Alg. 3, line 14).

KET-RAG indexes ℓ-token chunks but retrieves finer sub-chunks: with ℓ=1200
and τ=3, eight parts of about 150 tokens each. Smaller units waste less of
the context budget (paper, Table 4). The rules:

* A chunk of t tokens is cut into p = min(2^τ, t) parts, so a chunk shorter
  than 2^τ tokens gives fewer parts but never an empty one.
* The ideal cut after part i is at token ⌊i·t/p⌋, so part sizes differ by at
  most one token. Each cut then moves to the nearest start of a word, within
  a quarter of a part. This keeps a word such as "Tolkien" from being split
  into two pieces that would become two spurious keywords. Windows are a
  quarter part wide around cuts a whole part apart, so cuts stay ordered and
  parts stay non-empty. Where no word starts nearby, the ideal cut is used.
* Cuts fall on token character offsets, so each sub-chunk text is an exact
  substring of its chunk. The whitespace between two parts belongs to neither.
"""

from __future__ import annotations

from itertools import pairwise

import polars as pl

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError

SUBCHUNK_SCHEMA: dict[str, pl.DataType] = {
    "subchunk_id": pl.String(),
    "chunk_id": pl.String(),
    "doc_id": pl.String(),
    "j": pl.Int64(),
    "text": pl.String(),
    "n_tokens": pl.Int64(),
}


def split_subchunks(chunks: pl.DataFrame, tokenizer: Tokenizer, tau: int) -> pl.DataFrame:
    """Split every chunk into 2^τ near-equal token parts (see the module docstring).

    ``chunks`` needs columns ``chunk_id``, ``doc_id`` and ``text`` (the frame
    of ``kgrag.corpus.chunk_documents``). The result has one row per sub-chunk,
    in chunk order. ``subchunk_id`` is ``f"{chunk_id}/{j}"`` and ``n_tokens``
    counts the chunk's own tokens that fall in the part.
    """
    if tau < 0:
        raise KgragError(f"τ (sub-chunk splits) must be >= 0, got {tau}")
    parts = 2**tau
    texts = chunks["text"].to_list()
    rows: dict[str, list[object]] = {column: [] for column in SUBCHUNK_SCHEMA}
    for chunk_id, doc_id, text, offsets in zip(
        chunks["chunk_id"].to_list(), chunks["doc_id"].to_list(), texts,
        tokenizer.offsets_many(texts),
    ):
        cuts = _cuts(offsets, parts)
        for j, (first, stop) in enumerate(pairwise(cuts)):
            rows["subchunk_id"].append(f"{chunk_id}/{j}")
            rows["chunk_id"].append(chunk_id)
            rows["doc_id"].append(doc_id)
            rows["j"].append(j)
            rows["text"].append(text[offsets[first][0] : offsets[stop - 1][1]])
            rows["n_tokens"].append(stop - first)
    return pl.DataFrame(rows, schema=SUBCHUNK_SCHEMA)


def _cuts(offsets: list[tuple[int, int]], parts: int) -> list[int]:
    """Return the token boundaries 0 = c_0 < c_1 < … < c_p = t of one chunk's parts."""
    n_tokens = len(offsets)
    count = min(parts, n_tokens)
    if count == 0:
        return [0]
    slack = n_tokens // count // 4
    cuts = [0]
    for i in range(1, count):
        ideal = i * n_tokens // count
        window = range(ideal - slack, ideal + slack + 1)
        starts = [c for c in window if offsets[c][0] > offsets[c - 1][1]]
        cuts.append(min(starts, key=lambda c: (abs(c - ideal), c)) if starts else ideal)
    cuts.append(n_tokens)
    return cuts
