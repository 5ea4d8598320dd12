"""The keyword–sub-chunk bipartite graph of KET-RAG (Alg. 3, lines 15-19).

Keyword-RAG is the LLM-free half of KET-RAG. Each keyword stands in for an
entity, and the sub-chunks that contain it stand in for the entity's ego
network. A query is matched against keyword vectors, and the sub-chunks
linked to the best keywords become candidate context. A keyword's vector is
the mean embedding of the sentences that contain it. Those sentences are the
keyword's "description", much as an entity's description is in Graph-RAG.

Choices the paper leaves open:

* Sentences come from ``split_sentences`` on each sub-chunk's text, and
  keywords from ``kgrag.corpus.keywords``. A sentence that a sub-chunk
  boundary cuts counts as two sentences, one in each sub-chunk.
* The mean runs over sentence *occurrences* in the sub-chunks. A sentence
  that occurs in two sub-chunks (chunk overlap repeats text) counts twice,
  because it is twice in the keyword's description. A keyword repeated
  within one sentence counts that sentence once. The mean is **not**
  re-normalised, as in the authors' code: its norm shrinks as the sentences
  disagree, so an inner-product search favours focused keywords. A caller that
  wants pure cosine normalises it.
* Each distinct sentence text is embedded once, and the function receives
  the distinct texts in order of first occurrence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from kgrag.corpus.keywords import keyword_matrix
from kgrag.corpus.sentences import split_sentences
from kgrag.errors import KgragError

SentenceVectors = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Bipartite:
    """The bipartite graph as three frames, ready to write as parquet.

    * ``keywords``: ``keyword``, ``n_subchunks`` (its degree) and ``vector``
      (Array of float32, the mean sentence embedding), sorted by keyword.
    * ``edges``: ``keyword``, ``subchunk_id``, one row per (keyword,
      sub-chunk containing it), sorted by keyword, then sub-chunk input order.
    * ``sentences``: ``subchunk_id``, ``sentence_idx``, ``text``, every
      sentence occurrence, so a caller can cache or reuse them.
    """

    keywords: pl.DataFrame
    edges: pl.DataFrame
    sentences: pl.DataFrame


def build_bipartite(subchunks: pl.DataFrame, sentence_vectors_fn: SentenceVectors) -> Bipartite:
    """Build the keyword–sub-chunk graph of ``subchunks`` (columns ``subchunk_id``, ``text``).

    ``sentence_vectors_fn`` embeds a list of sentences into an (n, d) array,
    for example ``CachedEmbedder.encode``. It is called at most once, with
    each distinct sentence once.
    """
    subchunk_ids = subchunks["subchunk_id"].to_list()
    occurrence_subchunk: list[int] = []
    occurrence_sentence: list[int] = []
    sentence_idx: list[int] = []
    occurrence_text: list[str] = []
    distinct: dict[str, int] = {}
    for row, text in enumerate(subchunks["text"].to_list()):
        for idx, (start, end) in enumerate(split_sentences(text)):
            sentence = text[start:end]
            occurrence_subchunk.append(row)
            occurrence_sentence.append(distinct.setdefault(sentence, len(distinct)))
            sentence_idx.append(idx)
            occurrence_text.append(sentence)
    sentences = pl.DataFrame(
        {
            "subchunk_id": [subchunk_ids[row] for row in occurrence_subchunk],
            "sentence_idx": sentence_idx,
            "text": occurrence_text,
        },
        schema={"subchunk_id": pl.String(), "sentence_idx": pl.Int64(), "text": pl.String()},
    )
    texts = list(distinct)
    vectors = _embed(texts, sentence_vectors_fn)
    incidence, vocabulary = keyword_matrix(texts)  # distinct sentence × keyword
    # occurrences[s, u] = how often distinct sentence u occurs in sub-chunk s.
    import scipy.sparse as sp  # imported where a sparse matrix is made, not by every command

    occurrences = sp.csr_matrix(
        (np.ones(len(occurrence_sentence)), (occurrence_subchunk, occurrence_sentence)),
        shape=(len(subchunk_ids), len(texts)),
    )
    # Each keyword's mean weights sentence u by its number of occurrences.
    counts = np.bincount(occurrence_sentence, minlength=len(texts)).astype(np.float64)
    sums = incidence.T @ (counts[:, None] * vectors)
    means = sums / (incidence.T @ counts)[:, None]
    links = (occurrences @ incidence).T.tocsr()  # keyword × sub-chunk, nonzero = contains
    links.sort_indices()
    degree = np.diff(links.indptr)
    keywords = pl.DataFrame(
        {
            "keyword": pl.Series(vocabulary, dtype=pl.String()),
            "n_subchunks": pl.Series(degree, dtype=pl.Int64()),
            "vector": pl.Series(means.astype(np.float32)),
        }
    )
    edges = pl.DataFrame(
        {
            "keyword": pl.Series(np.repeat(np.asarray(vocabulary, dtype=object), degree),
                                 dtype=pl.String()),
            "subchunk_id": pl.Series(np.asarray(subchunk_ids, dtype=object)[links.indices],
                                     dtype=pl.String()),
        }
    )
    return Bipartite(keywords=keywords, edges=edges, sentences=sentences)


def _embed(texts: list[str], sentence_vectors_fn: SentenceVectors) -> np.ndarray:
    """Embed the distinct sentences, checking that one vector came back per sentence."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    vectors = np.asarray(sentence_vectors_fn(texts), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise KgragError(
            f"the sentence embedder returned shape {vectors.shape} for {len(texts)} sentences"
        )
    return vectors
