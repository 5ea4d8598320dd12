"""The personalised-PageRank walk that strategy ``ppr`` and the ppr channels of KET-RAG
and HugRAG share: graph, seeds, scoring, and the walk's parameters.

A random walk with restart at the question's entities over the entity–chunk graph
(``kgrag.retrieval.entity_graph``), chunks ranked by the mass they collect.

Seeds: the entities the question names, found by exact match of normalised words
(an entity's name, or a title without its disambiguating parenthesis); a match
inside a longer match is dropped, and so are names made of stop words only. Each
seed's restart weight is its specificity, 1 / (chunks mentioning it), so that a
hub such as "FILM" does not drown the rare name that identifies the passage. With
``dense_seeds`` w > 0, a share w of the restart goes to the ``dense_seed_chunks``
chunks nearest the question, in proportion to their min–max normalised cosine.
HippoRAG 2 gives every passage 0.05 × that score beside unnormalised entity weights,
so its passages hold most of the restart; a share over a few chunks measured better
here (musique_200 R@5 at w = 0.5: 0.559 over all chunks, 0.578 over the top 10).
Optional seeding (``kgrag.retrieval.seeds``, off unless set): ``question_mentions``
adds the question's mentions as the nlp extractor finds them, matched by name;
``nearest_names`` links a mention no name matches to the nearest name embedding;
``synonyms`` adds HippoRAG's synonym edges between names that embed close together.

Shapes and links (``phrases``, ``relations``, ``fact_links``, ``name_links``): the graph
keeps named phrases only, or drops its relationship edges (``kgrag.retrieval.entity_graph``),
and the question's vector meets rendered facts or phrase names to seed beyond exact
names (``kgrag.retrieval.fact_links``), each link weighted by its similarity.

Scoring: ``kgrag.graphs.ppr.Walk`` with the spec's damping and iteration cap, in
``PprSearch``; with ``walk: push``, its local forward push at ``push_epsilon`` (the same
restart vector and damping; the iteration cap does not apply), whose mass is zero on the
nodes it did not reach. Chunks with mass rank by it (ties by dense rank), then the
remaining chunks in dense order. The dense similarities are every chunk's, by one
product with the chunk vectors, or, when the dense artefact carries an ANN index, those
of the chunks the index finds nearest (``kgrag.retrieval.dense_scores``: no product with
every chunk; the remaining chunks are then those searched). A context is filled from
that ranking sorted only as far as the fill reads it (``PprSearch.filled``); the whole
ranking is built only for those that read it to its end (fusion, KET-RAG's skeleton
channel). Strategies sharing a search share its walks through a memo bounded in bytes
(``kgrag.retrieval.walked``). A question naming no entity of the graph is answered by
the dense ranking, and its trace says so (the retrieve step counts those fallbacks). The
trace lists the seeds with their weights, the ``REACHED`` other entities the walk left
most mass on, and each retrieved chunk's mass: why a chunk came back.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from kgrag.contents.chunks import read_chunks
from kgrag.contents.dense import MatrixRows, dense_matrix, dense_rows, open_dense
from kgrag.contents.entities import entity_parts, read_relationships, relationship_parts
from kgrag.errors import KgragError
from kgrag.graphs.ppr import Walk
from kgrag.models.embed.backends import TORCH, identity
from kgrag.retrieval.budget import LazyRanking, fill_budget
from kgrag.retrieval.dense_scores import FIRST_SEARCH, DenseScores, Flat, Nearest
from kgrag.retrieval.entity_graph import RELATION_ROWS, EntityGraph, named_phrases
from kgrag.retrieval.fact_links import FactLinks
from kgrag.retrieval.seeds import ExtractorMentions, NearestNames, synonym_pairs
from kgrag.retrieval.walk_params import PUSH_EPSILON, WALK_PARAMS, walk_of
from kgrag.retrieval.walked import ChunkMass, Walked, WalkMemo
from kgrag.store.vectors import VectorTable

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

NO_SEED = "no entity of the question is in the graph: dense ranking"
REACHED = 10  # entities besides the seeds that a trace lists, by the mass the walk left
# the settings that shape a search (its graph, seeds and walk), not what a strategy does
# with its ranking: strategies that agree on these share one search
SEARCH_KEYS = tuple(p.name for p in WALK_PARAMS)
_LOADED: dict[str, PprSearch] = {}
# the settings that shape the entity graph alone: searches that differ only in how they
# walk it (``walk: push`` beside the power walk) share one graph (``_entity_graph``)
GRAPH_KEYS = ("phrases", "relations", "specific_steps", "titles")
_GRAPHS: dict[str, EntityGraph] = {}
# the chunk vectors of the dense artefact searched last (``_chunk_vectors``)
_VECTORS: dict[str, tuple[list[str], np.ndarray | MatrixRows]] = {}
PHRASE_ROWS = 50_000  # entities read at a time where the named phrases are chosen


@dataclass(frozen=True)
class Seeds:
    """The question's seed entity nodes, how sure each link is (1 for a name found in the
    question, a fact's similarity for a fact link) and how the fallback linked some."""

    nodes: list[int]
    nearest: dict[str, str]  # mention → the graph name it was linked to by embedding
    certainty: list[float]


class PprSearch:
    """Link the question's entities, walk, rank chunks: what every PPR user shares.

    The ``ppr`` strategy, KET-RAG's skeleton channel with ``skeleton_search: ppr``
    and HugRAG's ``entity_seeds: ppr`` all rank through this one class, so a seed or
    walk improvement reaches each of them.
    """

    def __init__(self, graph: EntityGraph, chunk_matrix: np.ndarray | MatrixRows, *,
                 damping: float, max_iterations: int, dense_seeds: float,
                 dense_seed_chunks: int = 10,
                 push_epsilon: float | None = None, seeds_near: int | None = None,
                 mentions: Callable[[str], list[str]] | None = None,
                 nearest: NearestNames | None = None, links: Sequence[FactLinks] = (),
                 index: VectorTable | None = None) -> None:
        self.graph, self.walk = graph, Walk(graph.adjacency)
        self.chunk_matrix, self.index = chunk_matrix, index
        self.damping, self.max_iterations, self.dense_seeds = damping, max_iterations, dense_seeds
        self.dense_seed_chunks, self.push_epsilon = dense_seed_chunks, push_epsilon
        self.seeds_near = seeds_near
        self.mentions, self.nearest, self.links = mentions, nearest, list(links)
        self.walked = WalkMemo()

    @classmethod
    def load(cls, config: dict[str, Any], graph: Path, dense: Path, chunks: Path,
             resources: Resources) -> PprSearch:
        """The search over the entity tables in ``graph`` (an extract or hierarchy step's
        folder), with the chunk vectors in ``dense`` and the titles in ``chunks``. Strategies
        loaded one after another that walk the same graph with the same settings (the
        budgets of a sweep) share one search, and so one walk per question; the last search
        loaded is kept, so memory holds one graph."""
        damping = config["damping"]
        if not 0.0 < damping < 1.0:
            raise KgragError(f"strategy {config['name']!r}: damping must be in (0, 1), "
                             f"got {damping}")
        key = json.dumps([str(graph), str(dense), str(chunks), _identity(resources.embedder),
                          {k: config.get(k) for k in SEARCH_KEYS}], sort_keys=True)
        if key not in _LOADED:
            _LOADED.clear()  # one graph at a time: a run's strategies come in spec order
            _LOADED[key] = cls._build(config, graph, dense, chunks, resources)
        return _LOADED[key]

    @classmethod
    def _build(cls, config: dict[str, Any], graph: Path, dense: Path, chunks: Path,
               resources: Resources) -> PprSearch:
        chunk_table = open_dense(dense)
        index = chunk_table if chunk_table.ann is not None else None
        ids, matrix = _chunk_vectors(dense, by_rows=index is not None)
        entity_graph = _entity_graph(config, graph, dense, chunks, ids)
        mentions = nearest = facts = names = None
        if config.get("question_mentions"):
            mentions = ExtractorMentions(resources.pipeline)
        if any(config.get(k) for k in ("nearest_names", "synonyms", "name_links")):
            vectors = resources.embedder.encode(entity_graph.names)
            if config.get("synonyms"):
                entity_graph = entity_graph.with_synonyms(
                    synonym_pairs(vectors, config["synonyms"]))
            if config.get("nearest_names"):
                nearest = NearestNames(vectors, resources.embedder.encode,
                                       config["nearest_names"])
            if config.get("name_links"):
                names = FactLinks.names(vectors, config["name_links"])
        if config.get("fact_links"):
            node = {name: i for i, name in enumerate(entity_graph.names)}
            relationships = read_relationships(graph, ["source", "target", "strength",
                                                       "description"])
            facts = FactLinks.build(relationships, node.get,
                                    lambda texts: resources.embedder.encode(texts),
                                    config["fact_links"])
            if not len(facts.ends):
                raise KgragError(f"strategy {config['name']!r}: fact_links links the question "
                                 f"to relationships, and the graph in {graph} has none between "
                                 "two of its phrase nodes; leave fact_links out")
        return cls(entity_graph, matrix, damping=config["damping"],
                   max_iterations=config["max_iterations"], dense_seeds=config["dense_seeds"],
                   dense_seed_chunks=config["dense_seed_chunks"],
                   push_epsilon=(config.get("push_epsilon") or PUSH_EPSILON
                                 if walk_of(config, len(ids)) == "push" else None),
                   seeds_near=config.get("seeds_near"), mentions=mentions,
                   nearest=nearest, links=[links for links in (facts, names) if links],
                   index=index)

    def seeds(self, question: str, vector: np.ndarray | None = None) -> Seeds:
        """Names in the question, then the extractor's mentions matched by name, then
        (with ``nearest``) the unmatched mentions linked to their nearest name, then (with
        ``links``: fact links, name links) the nodes nearest the question's vector."""
        nodes = self.graph.link(question)
        nearest: dict[str, str] = {}
        if self.mentions is not None:
            found = self.mentions(question)
            named = {m: self.graph.named(m) for m in found}
            nodes += [node for node in named.values() if node is not None]
            if self.nearest is not None:
                linked = self.nearest.link([m for m, node in named.items() if node is None])
                nodes += list(linked.values())
                nearest = {m: self.graph.names[node] for m, node in linked.items()}
        nodes = list(dict.fromkeys(nodes))
        certainty = [1.0] * len(nodes)
        nearest_vector = [] if vector is None else [links.link(vector) for links in self.links]
        for linked_nodes in nearest_vector:
            for node, similarity in linked_nodes.items():
                if node in nodes:
                    at = nodes.index(node)
                    certainty[at] = max(certainty[at], similarity)
                else:
                    nodes.append(node)
                    certainty.append(similarity)
        return Seeds(nodes, nearest, certainty)

    def dense_scores(self, vector: np.ndarray) -> DenseScores:
        """The question's dense similarities: every chunk's by one product with the chunk
        matrix, or the nearest chunks' through the dense artefact's ANN index when it has
        one (``kgrag.retrieval.dense_scores``)."""
        vector, matrix = vector.astype(np.float32), self.chunk_matrix
        if self.index is None:
            assert not isinstance(matrix, MatrixRows), "a flat scan maps the matrix"
            return Flat(matrix @ vector)
        assert isinstance(matrix, MatrixRows), "a search over an index reads rows"
        return Nearest.search(self.index, matrix, self.position, vector,
                              max(FIRST_SEARCH, self.dense_seed_chunks, self.seeds_near or 0))

    def run(self, question: str, vector: np.ndarray
            ) -> tuple[np.ndarray | None, DenseScores, dict[str, Any]]:
        """The PPR mass of every node (None when no seed links: the caller falls back),
        the question's dense similarities, and the trace (seeds and their weights). Only
        the dense seeds are sorted out of the similarities, not every chunk."""
        dense = self.dense_scores(vector)
        seeds = self.seeds(question, vector)
        far: list[int] = []  # seeds left out by seeds_near
        if self.seeds_near and seeds.nodes:
            seeds, far = self._near(seeds, dense)
        if not seeds.nodes or not max(seeds.certainty) > 0:
            return None, dense, {"fallback": NO_SEED, "seeds": {}}
        n_entities = len(self.graph.names)
        weights = self.graph.specificity(seeds.nodes) * np.array(seeds.certainty)
        nodes, restart = [np.array(seeds.nodes, dtype=np.int64)], [
            (1.0 - self.dense_seeds) * weights / weights.sum()]
        if self.dense_seeds > 0:
            top, closeness = dense.seeds(self.dense_seed_chunks)
            if closeness.sum() > 0:
                nodes.append(n_entities + top)
                restart.append(self.dense_seeds * closeness / closeness.sum())
        mass, walked = self._walk(np.concatenate(nodes), np.concatenate(restart))
        trace: dict[str, Any] = {"seeds": {self.graph.names[s]: round(float(w), 6)
                                           for s, w in zip(seeds.nodes, weights)}}
        entities = walked[walked < n_entities]
        entity_mass = mass[entities]
        entity_mass[np.isin(entities, seeds.nodes)] = 0.0  # the seeds are listed already
        reached = [int(entities[i]) for i in np.argsort(-entity_mass, kind="stable")[:REACHED]
                   if entity_mass[i] > 0]
        trace["reached"] = {self.graph.names[i]: round(float(mass[i]), 8) for i in reached}
        if seeds.nearest:
            trace["nearest"] = seeds.nearest
        if far:  # names the question shares only with chunks far from it
            trace["far_seeds"] = [self.graph.names[node] for node in far]
        return mass, dense, trace

    def _near(self, seeds: Seeds, dense: DenseScores) -> tuple[Seeds, list[int]]:
        """The seeds one of whose chunks is among the question's ``seeds_near`` nearest by
        dense similarity, or all of them when none is (``seeds_near``), and the nodes
        left out."""
        near = len(self.graph.names) + dense.nearest(self.seeds_near or 0)
        starts, links = self.graph.adjacency.indptr, self.graph.adjacency.indices
        kept = [i for i, node in enumerate(seeds.nodes)
                if np.isin(links[starts[node]:starts[node + 1]], near).any()]
        if not kept:
            return seeds, []
        far = [node for i, node in enumerate(seeds.nodes) if i not in kept]
        return Seeds([seeds.nodes[i] for i in kept], seeds.nearest,
                     [seeds.certainty[i] for i in kept]), far

    def _walk(self, nodes: np.ndarray, restart: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every node's mass (restart weights ``restart`` at ``nodes``, summed where a node
        repeats), and the nodes that may hold any: all of them for the power walk, those
        the push reached for a push walk (a few thousand at any graph size)."""
        if self.push_epsilon is None:
            dense = np.zeros(self.walk.n)
            np.add.at(dense, nodes, restart)
            return (self.walk.run(dense, self.damping, max_steps=self.max_iterations),
                    np.arange(self.walk.n))
        touched, estimate, _ = self.walk.push(nodes, restart, self.damping, self.push_epsilon)
        mass = np.zeros(self.walk.n)  # zeroed pages: only the touched ones are written
        mass[touched] = estimate
        return mass, touched

    def subgraph(self, entities: list[str], chunks: list[str]) -> dict[str, list[list[str]]]:
        """The walked graph's edges among ``entities`` (names) and ``chunks`` (ids): each
        entity's mentions of those chunks, and the relationships between those entities,
        so that the report can draw what the walk went through (``kgrag.report.walk``)."""
        named = [(e, self.entity_node[e]) for e in entities if e in self.entity_node]
        offset = len(self.graph.names)
        held = [(c, offset + self.position[c]) for c in chunks if c in self.position]
        rows = [i for _, i in named]  # one slice of the graph, not an element lookup a pair
        columns = rows + [j for _, j in held]
        # the rows' stored edges matched to the columns, not a column slice: that sizes an
        # array by every node of the graph (40 ms a question at a million chunks)
        edges = self.graph.adjacency[rows].tocoo()
        where: dict[int, list[int]] = {}
        for k, node in enumerate(columns):
            where.setdefault(node, []).append(k)
        block = np.zeros((len(rows), len(columns)), dtype=bool)
        near = np.isin(edges.col, columns) & (edges.data != 0)
        for row, column in zip(edges.row[near].tolist(), edges.col[near].tolist()):
            block[row, where[column]] = True
        mentions = [[e, c] for r, (e, _) in enumerate(named)
                    for k, (c, _) in enumerate(held) if block[r, len(rows) + k]]
        relations = [[a, b] for r, (a, _) in enumerate(named)
                     for k, (b, _) in enumerate(named[r + 1:], r + 1) if block[r, k]]
        return {"mentions": mentions, "relations": relations}

    def scored(self, question: str, vector: np.ndarray
               ) -> tuple[list[str], Mapping[str, float], dict[str, Any]]:
        """Every chunk best first (by mass, ties and the massless rest in dense order;
        over an ANN index, the massless rest is the chunks searched), each chunk's PPR
        mass, and the trace; the dense ranking when no seed links. What fusion and
        KET-RAG's skeleton channel read: a context reads ``filled``."""
        walked = self.question_walk(question, vector)
        dense_order = walked.dense.order()
        trace = copy.deepcopy(walked.trace)
        if walked.mass is None:
            return self.chunk_array[dense_order].tolist(), {}, trace
        massless = np.ones(len(self.chunk_array), dtype=bool)
        massless[walked.held] = False
        order = np.concatenate([walked.held, dense_order[massless[dense_order]]])
        return (self.chunk_array[order].tolist(),
                ChunkMass(self.position, self.chunk_array, walked.held, walked.mass), trace)

    def filled(self, question: str, vector: np.ndarray, sizes: np.ndarray,
               tokens: Mapping[str, int], budget: int
               ) -> tuple[list[str], Mapping[str, float], dict[str, Any]]:
        """The chunks ``fill_budget`` takes into ``budget`` from ``scored``'s ranking
        (``sizes``: each chunk's tokens, in the graph's chunk order), each chunk's mass
        and the trace, with the ranking sorted only as far as the fill reads it: the
        chunks with mass (sorted already), then the massless rest in dense order, sorted
        block by block (``filled_best``). Sorting and naming every chunk cost a question
        several times the push walk at a million chunks."""
        walked = self.question_walk(question, vector)
        trace = copy.deepcopy(walked.trace)
        if walked.mass is None:
            return (walked.dense.fill(walked.held, self.chunk_array, sizes, tokens, budget),
                    {}, trace)
        chosen = fill_budget(self.chunk_array[walked.held].tolist(), tokens, budget)
        left = budget - sum(tokens[chunk] for chunk in chosen)
        chosen += walked.dense.fill(walked.held, self.chunk_array, sizes, tokens, left)
        return chosen, ChunkMass(self.position, self.chunk_array, walked.held,
                                 walked.mass), trace

    def reading(self, question: str, vector: np.ndarray, sizes: np.ndarray) -> LazyRanking:
        """``scored``'s ranking sorted only as far as it is read (``sizes``: each chunk's
        tokens, in the graph's chunk order): the chunks with mass, sorted already, then
        the massless rest by dense similarity (what fusion reads; over an ANN index,
        given whole: the searched chunks end it)."""
        walked = self.question_walk(question, vector)
        return walked.dense.reading(self.chunk_array[walked.held].tolist(), walked.held,
                                    self.chunk_array, sizes, self.position)

    def question_walk(self, question: str, vector: np.ndarray) -> Walked:
        """The question's walk; a question asked again (by another budget of a sweep, or
        by fusion's ranking after the context) is not walked again while the memo
        (``kgrag.retrieval.walked``: bounded in bytes) still holds it."""
        return self.walked.get(question, vector, lambda: self._question_walk(question, vector))

    def _question_walk(self, question: str, vector: np.ndarray) -> Walked:
        """The walk's ranking inputs: the chunks with mass and their mass copied out of
        every node's mass, which is dropped (at a million chunks with the power walk, about
        90 MB a question)."""
        mass, dense, trace = self.run(question, vector)
        if mass is None:
            return Walked(dense, np.arange(0), None, trace)
        chunk_mass = mass[len(self.graph.names):]
        # only the chunks with mass are sorted (a push reaches a few hundred of a million),
        # by mass, ties in dense order: by similarity, then position (a stable sort's ties)
        held = np.flatnonzero(chunk_mass > 0)
        held = held[np.lexsort((held, -dense.of(held), -chunk_mass[held]))]
        return Walked(dense, held, chunk_mass[held], trace)

    @functools.cached_property
    def chunk_array(self) -> np.ndarray:
        """The chunk ids as an array, picked in ranking order in one step (a list built id
        by id cost a question tens of milliseconds at a million chunks)."""
        return np.array(self.graph.chunk_ids, dtype=object)

    @functools.cached_property
    def entity_node(self) -> dict[str, int]:
        """Entity name → its node (the entities come first in the graph)."""
        return {name: i for i, name in enumerate(self.graph.names)}

    @functools.cached_property
    def position(self) -> dict[str, int]:
        """Chunk id → its row in the walk's chunk block."""
        return {chunk: j for j, chunk in enumerate(self.graph.chunk_ids)}


def _chunk_vectors(dense: Path, by_rows: bool) -> tuple[list[str], np.ndarray | MatrixRows]:
    """The chunk ids and normalised vectors of the dense artefact ``dense``: mapped
    (``dense_matrix``) for a flat scan, read by rows (``dense_rows``) for a search over an
    ANN index; the last opened is kept, so the searches of a run that walk one graph
    differently share it."""
    key = f"{dense}:{by_rows}"
    if key not in _VECTORS:
        _VECTORS.clear()
        _VECTORS[key] = dense_rows(dense) if by_rows else dense_matrix(dense)
    return _VECTORS[key]


def _entity_graph(config: dict[str, Any], graph: Path, dense: Path, chunks: Path,
                  ids: list[str]) -> EntityGraph:
    """The entity graph of the tables in ``graph`` over the chunks ``ids`` (the dense
    table's order), as ``config`` shapes it; the last one built is kept, so the strategies
    of a run that walk one graph differently build it once."""
    key = json.dumps([str(graph), str(dense), str(chunks),
                      {k: config.get(k) for k in GRAPH_KEYS}], sort_keys=True)
    if key in _GRAPHS:
        return _GRAPHS[key]
    _GRAPHS.clear()
    entities = _phrases(config, graph)
    relationships = relationship_parts(graph, ["source", "target", "strength"], RELATION_ROWS)
    titles = None
    if config["titles"]:
        table = read_chunks(chunks, ["chunk_id", "title"])
        titles = dict(zip(table["chunk_id"].to_list(), table["title"].to_list()))
    # the phrases are chosen already (``_phrases``): the graph keeps every one it is given
    _GRAPHS[key] = EntityGraph.build(entities, relationships, ids, titles,
                                     config["specific_steps"], "all",
                                     config.get("relations", True))
    return _GRAPHS[key]


def _phrases(config: dict[str, Any], graph: Path) -> Iterator[pl.DataFrame]:
    """The names and chunks of the entities in ``graph`` that ``config``'s graph keeps,
    ``PHRASE_ROWS`` entities at a time: every one, or with ``phrases: named`` the named
    phrases (``named_phrases``). Their types and descriptions serve that choice alone,
    and the whole table with them took 490 MB at 715,914 nlp entities."""
    named = config.get("phrases", "all") == "named"
    columns = ["name", "source_chunk_ids"]
    read = 0
    for part in entity_parts(graph, columns + (["type", "description"] if named else []),
                             PHRASE_ROWS):
        read += part.height
        if named:
            part = part.filter(pl.Series(named_phrases(part), dtype=pl.Boolean))
        yield part.select(columns)
    if not read:
        raise KgragError(f"strategy {config['name']!r}: the graph in {graph} has no "
                         "entities; ppr needs an entity table to walk")


def _identity(embedder: Any) -> str | None:
    """The embedder's identity, its backend included (name links, fact links and synonyms
    embed with it, and an int8 backend's vectors are not the fp32 ones)."""
    settings = getattr(embedder, "settings", None)
    if embedder is None:
        return None
    if settings is None or getattr(settings, "sha256", None) is None:
        return str(id(embedder))
    return identity(settings.sha256, getattr(settings, "backend", TORCH))
