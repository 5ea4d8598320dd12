"""The graph HugRAG retrieves over (paper §3.2, App. B.2), assembled from a hierarchy build.

One graph holds four kinds of node — entities, modules of every hierarchy level,
text chunks — and four kinds of edge, each with the authors' released weight:

============  =====================================================  ======
edge          joins                                                  weight
============  =====================================================  ======
gate          two modules the gate step judged causally linked        1.2
structural    an entity and a chunk it was extracted from             1.0
membership    a module and its child modules / its member entities    1.0
relationship  two entities an extracted relationship joins            0.8
============  =====================================================  ======

(The authors' code names structural and relationship edges separately without
defining them; reading "structural" as entity–source-chunk evidence is our
decision, and it is what brings source text into the evidence at all.)

Every node also has a vector (entity and summary vectors from the build, chunk
vectors from the dense index) and a keyword set (``keyword_lexicon``), which the
search's hybrid score reads (``kgrag.retrieval.hugrag.search``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from kgrag.contents.dense import dense_matrix
from kgrag.contents.entities import open_entity_vectors, read_entities, read_relationships
from kgrag.contents.gates import read_gates
from kgrag.contents.hierarchy import read_modules
from kgrag.contents.summaries import open_module_vectors, read_summaries
from kgrag.corpus.keywords import keyword_matrix, keywords
from kgrag.retrieval.units import Units
from kgrag.store.vectors import VectorTable

if TYPE_CHECKING:
    import scipy.sparse as sp

EDGE_TYPES = ("gate", "structural", "membership", "relationship")


@dataclass(frozen=True)
class Node:
    kind: str  # entity | module | chunk
    key: str  # entity name, module id or chunk id
    text: str
    tokens: int


class HugragGraph:
    """Every node, its vector, keyword set and edges, for one hierarchy build."""

    def __init__(self, nodes: list[Node], vectors: np.ndarray, lexicon: sp.csr_matrix,
                 vocabulary: dict[str, int], edges: list[list[tuple[int, str]]],
                 relationships: pl.DataFrame, chunk_docs: Mapping[str, str]) -> None:
        self.nodes, self.vectors, self.lexicon = nodes, vectors, lexicon
        self.vocabulary, self.edges = vocabulary, edges
        self.chunk_docs = chunk_docs
        self.index = {(n.kind, n.key): i for i, n in enumerate(nodes)}
        self.kind = np.array([n.kind for n in nodes])
        # relationship rows between entity node indices, strongest first
        self.relationships = [
            (self.index[("entity", s)], self.index[("entity", t)], text, tokens)
            for s, t, text, tokens in relationships.sort(
                ["strength", "relationship_id"], descending=[True, False]
            ).select("source", "target", "text", "tokens").iter_rows()
        ]

    @classmethod
    def load(cls, artefacts: dict[str, Path], units: Units, *, use_hierarchy: bool,
             use_gates: bool) -> HugragGraph:
        """The graph from a hierarchy build's folders (modules only with ``use_hierarchy``,
        gates only with ``use_gates`` too) and the dense index's chunk vectors."""
        folder = artefacts["hierarchy"]
        entities = read_entities(folder)
        entity_vectors = _aligned(open_entity_vectors(folder), entities["entity_id"])
        modules, module_vectors, gates = None, None, []
        module_rows = read_modules(folder)
        if use_hierarchy and not module_rows.is_empty():  # no modules: the build's fallback
            modules = module_rows.join(read_summaries(artefacts["summaries"]), on="module_id")
            module_vectors = _aligned(open_module_vectors(artefacts["summaries"]),
                                      modules["module_id"])
            if use_gates:
                gates = read_gates(artefacts["gates"])
        chunk_ids, chunk_vectors = dense_matrix(artefacts["dense"])
        return cls.assemble(entities, entity_vectors, read_relationships(folder), modules,
                            module_vectors, gates, chunk_ids, chunk_vectors, units)

    @classmethod
    def assemble(cls, entities: pl.DataFrame, entity_vectors: np.ndarray,
                 relationships: pl.DataFrame, modules: pl.DataFrame | None,
                 module_vectors: np.ndarray | None, gates: list[tuple[str, str]],
                 chunk_ids: list[str], chunk_vectors: np.ndarray, units: Units) -> HugragGraph:
        """The graph from in-memory tables, vectors row-aligned with them.

        ``entities``: name, text, tokens, chunk_ids, module_id (leaf module or null);
        ``relationships``: relationship_id, source, target, strength, text, tokens;
        ``modules`` (None: no hierarchy): module_id, parent, text, tokens; ``gates``:
        module id pairs; ``units`` holds the chunks' text, tokens and documents.
        """
        nodes = [Node("entity", n, t, k) for n, t, k in
                 entities.select("name", "text", "tokens").iter_rows()]
        blocks = [entity_vectors]
        index = {("entity", n): i for i, n in enumerate(entities["name"])}
        pairs = [(("entity", s), ("entity", t), "relationship")
                 for s, t in relationships.select("source", "target").iter_rows()]
        if modules is not None:
            assert module_vectors is not None, "a hierarchy comes with its modules' vectors"
            index |= {("module", m): len(nodes) + i for i, m in enumerate(modules["module_id"])}
            nodes += [Node("module", m, t, k) for m, t, k in
                      modules.select("module_id", "text", "tokens").iter_rows()]
            blocks.append(module_vectors)
            pairs += [(("module", parent), ("module", m), "membership") for m, parent in
                      modules.select("module_id", "parent").iter_rows() if parent is not None]
            pairs += [(("module", m), ("entity", n), "membership") for n, m in
                      entities.select("name", "module_id").iter_rows() if m is not None]
            pairs += [(("module", a), ("module", b), "gate") for a, b in gates]
        index |= {("chunk", c): len(nodes) + i for i, c in enumerate(chunk_ids)}
        nodes += [Node("chunk", c, units.text[c], units.tokens[c]) for c in chunk_ids]
        blocks.append(chunk_vectors)
        pairs += [(("entity", n), ("chunk", c), "structural") for n, chunks in
                  entities.select("name", "chunk_ids").iter_rows() for c in chunks
                  if ("chunk", c) in index]
        edges: list[list[tuple[int, str]]] = [[] for _ in nodes]
        for a, b, kind in sorted({(index[a], index[b], kind) for a, b, kind in pairs}):
            edges[a].append((b, kind))
            edges[b].append((a, kind))
        vectors = np.concatenate(blocks).astype(np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        lexicon, vocabulary = keyword_lexicon([n.text for n in nodes])
        return cls(nodes, vectors, lexicon, vocabulary, edges, relationships, units.doc)


def _aligned(table: VectorTable, ids: pl.Series) -> np.ndarray:
    """The table's vectors in the order of ``ids``."""
    stored, matrix = table.matrix()
    row = {key: i for i, key in enumerate(stored)}
    return matrix[[row[key] for key in ids]]


def words(text: str) -> list[str]:
    """The lower-cased keywords of ``text`` (stop words removed), what lexical scores match."""
    return keywords(text, lower=True)


def keyword_lexicon(texts: list[str]) -> tuple[sp.csr_matrix, dict[str, int]]:
    """The node × keyword incidence (``keyword_matrix`` over lower-cased keywords) as the
    float32 the hybrid score multiplies, and each keyword's column."""
    matrix, vocabulary = keyword_matrix(texts, lower=True)
    return matrix.astype(np.float32), {word: i for i, word in enumerate(vocabulary)}
