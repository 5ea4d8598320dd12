"""Split documents into overlapping token windows.

Windows are measured in the embedder's tokens so that no chunk is silently
truncated at embedding time, and they are cut at token character offsets so
every chunk is an exact substring of its document (citations and highlights
can point back into the source).

How a window is cut, kept deliberately simple:

* A document of at most ``size`` tokens is one chunk.
* Otherwise a window starts at token ``s`` and may end at ``s + size`` at the
  latest. Within its last quarter it ends at the latest sentence end (from
  ``split_sentences``); failing that, at the latest gap between words;
  failing that (long unbroken runs of text), exactly at ``s + size``.
* The next window starts ``overlap`` tokens before the previous end, moved
  back (by at most a quarter window) to the start of a word, so consecutive
  chunks share about ``overlap`` tokens and words are not split.
* The last window always reaches the end of the document, and every window
  adds tokens the previous one did not have.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from kgrag.corpus.sentences import split_sentences
from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError

TOKENIZE_BATCH = 1_000  # documents tokenised together: their offsets are held at once

CHUNK_SCHEMA: dict[str, pl.DataType] = {
    "chunk_id": pl.String(),
    "doc_id": pl.String(),
    "idx": pl.Int64(),
    "text": pl.String(),
    "n_tokens": pl.Int64(),
    "start": pl.Int64(),
    "end": pl.Int64(),
}


def chunk_documents(
    documents: pl.DataFrame, tokenizer: Tokenizer, size: int, overlap: int
) -> pl.DataFrame:
    """Chunk every document of a corpus into token windows (see the module docstring).

    Documents are tokenised ``TOKENIZE_BATCH`` at a time, each batch in one parallel
    ``encode_batch`` call, so a few thousand paragraphs chunk in well under a second and
    the token offsets held at once stay bounded whatever the corpus's size.
    """
    if size < 1 or overlap < 0 or overlap >= size:
        raise KgragError(
            f"chunking needs size >= 1 and 0 <= overlap < size, got size={size}, "
            f"overlap={overlap}; lower chunking.overlap or raise chunking.size"
        )
    rows: dict[str, list[object]] = {column: [] for column in CHUNK_SCHEMA}
    # a batch's token offsets are Python tuples, tens of KB per chunk: held one batch at
    # a time, so that chunking a million documents does not hold all of theirs at once
    for batch in documents.select("doc_id", "text").iter_slices(TOKENIZE_BATCH):
        texts = batch["text"].to_list()
        for doc_id, text, offsets in zip(batch["doc_id"].to_list(), texts,
                                         tokenizer.offsets_many(texts)):
            for idx, (first, stop) in enumerate(_windows(text, offsets, size, overlap)):
                start, end = offsets[first][0], offsets[stop - 1][1]
                rows["chunk_id"].append(f"{doc_id}:{idx}")
                rows["doc_id"].append(doc_id)
                rows["idx"].append(idx)
                rows["text"].append(text[start:end])
                rows["n_tokens"].append(stop - first)
                rows["start"].append(start)
                rows["end"].append(end)
    return pl.DataFrame(rows, schema=CHUNK_SCHEMA)


def _windows(
    text: str, offsets: list[tuple[int, int]], size: int, overlap: int
) -> list[tuple[int, int]]:
    """Return [first, stop) token ranges of the windows of one document."""
    n_tokens = len(offsets)
    if n_tokens <= size:
        return [(0, n_tokens)] if n_tokens else []
    sentence_ends = {end for _, end in split_sentences(text)}
    slack = size // 4

    def ends_sentence(cut: int) -> bool:
        return offsets[cut - 1][1] in sentence_ends

    def starts_word(cut: int) -> bool:
        return offsets[cut][0] > offsets[cut - 1][1]

    windows = []
    first = 0
    while first + size < n_tokens:
        limit = first + size
        tail = range(limit, limit - slack - 1, -1)
        stop = _latest(tail, ends_sentence) or _latest(tail, starts_word) or limit
        windows.append((first, stop))
        target = max(stop - overlap, first + 1)
        first = _latest(range(target, max(target - slack, first), -1), starts_word) or target
    windows.append((first, n_tokens))
    return windows


def _latest(cuts: range, accept: Callable[[int], bool]) -> int | None:
    """Return the first accepted cut of a descending range (the latest position), if any.

    Cuts are token indices above a window's first token, so never 0, and
    callers can chain fallbacks with ``or``.
    """
    return next((cut for cut in cuts if accept(cut)), None)
