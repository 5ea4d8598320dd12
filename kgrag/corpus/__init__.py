"""Corpus loading, sentence splitting, tokenisation and chunking.

This package turns user files into the frames the rest of kgrag consumes:
``load_corpus`` reads a dataset into a ``Corpus`` and ``chunk_documents``
cuts its documents into token windows measured by the embedder's
``Tokenizer``.
"""

from kgrag.corpus.chunking import chunk_documents
from kgrag.corpus.corpus import Corpus
from kgrag.corpus.importers import load_corpus
from kgrag.corpus.sentences import split_sentences
from kgrag.corpus.tokenizer import Tokenizer

__all__ = ["Corpus", "Tokenizer", "chunk_documents", "load_corpus", "split_sentences"]
