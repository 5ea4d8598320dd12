"""Strategy ``hugrag``: HugRAG's online retrieval (paper §3.2, App. B.2–B.3).

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

A question is answered in four steps:

1. **Hybrid score** of every node, s(q, v) = α·cos(q, v) + (1−α)·lex(q, v), where
   lex is the share of the question's keywords found in the node's text (title and
   summary / name and description / chunk text); α = 0.7 favours meaning.
2. **Seeds by MMR** (λ = 0.7), separately over entities and over the modules of
   every level (3 + 3): each pick maximises λ·s − (1−λ)·(max cosine to the seeds of
   its kind already picked). Seeds must score above 0; when none does (a question
   the graph knows nothing about), the best chunks seed the search instead, and the
   trace records the fallback.
3. **Gated best-first expansion**: a max-heap on gain, seeds at their score; a node
   reached from u at hop h+1 over an edge of type t has gain s(q, v)·w(t)·γ^(h+1)
   (γ = 0.7). The gain is per node (the paper's Eq. 2 is lost from the text; a
   product along the path would make every 3-hop node negligible at γ = 0.7).
   Popping a node adds it when its text fits the budget; its ``fan_out`` best
   unvisited neighbours are pushed while h < ``max_hops``. It stops when the heap is
   empty or the budget is spent. Relationships between chosen entities are then
   added, strongest first, while the budget lasts.
4. **Causal filter** (Eq. 4): the evidence is linearised with short ids (``M``
   modules, ``N`` entities, ``R`` relationships, ``T`` text chunks) and one
   constrained LLM call returns JSON ``{precise, ct_precise, p_answer}`` (the
   spurious-aware prompt, Fig. 5) or ``{precise}`` (the standard prompt, Fig. 6);
   the id lists are enums of the ids shown, at most 10 each. The answer step then
   reads only the ``precise`` items. Fallback, recorded per question in the trace:
   when the output never parses or ``precise`` is empty, the whole expansion is
   kept (what the no-filter ablation reads).

``entity_seeds: ppr`` (not in the paper; issue 19) picks the ``seed_entities``
entity seeds by personalised PageRank instead of MMR: the hierarchy's canonical
entities are walked from the entities the question names (``PprSearch``, as
strategy ``ppr`` walks them) and the entities with the most mass seed the gated
expansion, each at its hybrid score. Module seeds stay MMR's. A question naming no
entity of the graph is seeded by MMR, and the trace says so.

Ablations are switches: ``use_gates: false`` drops gate edges,
``use_hierarchy: false`` drops modules (no module seeds, membership or gates: entity
neighbourhoods only), ``causal_filter: false`` skips step 4 (one LLM call per
query), ``filter_prompt: standard`` uses Fig. 6's prompt.

For the paper's structural metrics (App. E) every question also records which
entities the expansion reached at which hop, and — when gates are on — what a
second, gate-free expansion reached (pure graph work, no LLM), so reachability,
coverage and min hops compare with and without gates on identical questions.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from kgrag.contents.dense import open_dense
from kgrag.contents.entities import open_entity_vectors, read_entities, read_relationships
from kgrag.contents.gates import read_gates
from kgrag.contents.hierarchy import read_modules
from kgrag.contents.summaries import open_module_vectors, read_summaries
from kgrag.corpus.keywords import keywords
from kgrag.errors import KgragError
from kgrag.models.llm import InvalidOutput
from kgrag.retrieval.local_search import graph_step
from kgrag.retrieval.ppr import PprSearch
from kgrag.retrieval.units import Context, Units
from kgrag.store.vectors import VectorTable

if TYPE_CHECKING:
    from kgrag.retrieval import Resources

EDGE_TYPES = ("gate", "structural", "membership", "relationship")
PREFIX = {"module": "M", "entity": "N", "relationship": "R", "chunk": "T"}
MAX_IDS = 10
FILTER_MAX_TOKENS = 320

FILTER_SPURIOUS_AWARE = (
    "You are a causality analyst. Below are a question and evidence items, each with an id. "
    "Put in \"precise\" the ids of the items that lie on a causal or logical path from the "
    "question to its answer. Put in \"ct_precise\" the ids of items that are only topically "
    "similar or merely correlated: they must not be used. Then write \"p_answer\", a short "
    "preliminary answer (at most 80 words)."
)
FILTER_STANDARD = (
    "You are a causality analyst. Below are a question and evidence items, each with an id. "
    "Put in \"precise\" the ids of the items that lie on a causal or logical path from the "
    "question to its answer."
)


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
                 relationships: pl.DataFrame, chunk_docs: dict[str, str]) -> None:
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
    def load(cls, artefacts: dict[str, Path], resources: Resources, *, use_hierarchy: bool,
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
        chunk_ids, chunk_vectors = open_dense(artefacts["dense"]).matrix()
        return cls.assemble(entities, entity_vectors, read_relationships(folder), modules,
                            module_vectors, gates, chunk_ids, chunk_vectors, resources.units)

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

    def scores(self, question: str, vector: np.ndarray, alpha: float) -> np.ndarray:
        """s(q, v) for every node: α·cosine + (1−α)·share of question keywords in v."""
        semantic = self.vectors @ vector.astype(np.float32)
        words = set(_words(question))
        wanted = sorted(self.vocabulary[w] for w in words if w in self.vocabulary)
        n_words = len(words)
        lexical = np.zeros(len(self.nodes), dtype=np.float32)
        if wanted and n_words:
            lexical = np.asarray(self.lexicon[:, wanted].sum(axis=1)).ravel() / n_words
        return alpha * semantic + (1 - alpha) * lexical

    def mmr(self, scores: np.ndarray, kind: str, k: int, lam: float) -> list[int]:
        """k nodes of one kind by maximal marginal relevance (ties: lower index)."""
        pool = np.flatnonzero(self.kind == kind)
        chosen: list[int] = []
        if not len(pool):
            return chosen
        redundancy = np.full(len(pool), 0.0, dtype=np.float32)
        available = np.ones(len(pool), dtype=bool)
        for _ in range(min(k, len(pool))):
            value = lam * scores[pool] - (1 - lam) * redundancy
            value[~available] = -np.inf
            pick = int(np.argmax(value))
            available[pick] = False
            chosen.append(int(pool[pick]))
            similarity = self.vectors[pool] @ self.vectors[pool[pick]]
            redundancy = similarity if len(chosen) == 1 else np.maximum(redundancy, similarity)
        return chosen

    def expand(self, seeds: list[int], scores: np.ndarray, budget: int, *,
               weights: dict[str, float], decay: float, max_hops: int, fan_out: int,
               allowed: frozenset[str]) -> tuple[dict[int, int], int]:
        """Best-first gated expansion: chosen node → hop, in the order chosen; tokens used."""
        heap = [(-float(scores[s]), 0, s) for s in dict.fromkeys(seeds)]
        heapq.heapify(heap)
        chosen: dict[int, int] = {}
        used = 0
        while heap and used < budget:
            _, hop, node = heapq.heappop(heap)
            if node in chosen or used + self.nodes[node].tokens > budget:
                continue
            chosen[node] = hop
            used += self.nodes[node].tokens
            if hop >= max_hops:
                continue
            step = decay ** (hop + 1)
            frontier = sorted(
                ((float(scores[v]) * weights[kind] * step, v)
                 for v, kind in self.edges[node] if kind in allowed and v not in chosen),
                key=lambda pair: (-pair[0], pair[1]))
            for gain, v in frontier[:fan_out]:
                heapq.heappush(heap, (-gain, hop + 1, v))
        return chosen, used

    def relationships_among(self, chosen: dict[int, int], room: int
                            ) -> tuple[list[tuple[str, int]], int]:
        """Relationship rows joining two chosen entities, strongest first, within ``room``."""
        rows, used = [], 0
        for a, b, text, tokens in self.relationships:
            if a in chosen and b in chosen and used + tokens <= room:
                rows.append((text, tokens))
                used += tokens
        return rows, used


def _aligned(table: VectorTable, ids: pl.Series) -> np.ndarray:
    """The table's vectors in the order of ``ids``."""
    stored, matrix = table.matrix()
    row = {key: i for i, key in enumerate(stored)}
    return matrix[[row[key] for key in ids]]


def _words(text: str) -> list[str]:
    return [w.lower() for w in keywords(text)]


def keyword_lexicon(texts: list[str]) -> tuple[sp.csr_matrix, dict[str, int]]:
    """Binary node × keyword matrix (lower-cased keywords, stop words removed)."""
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for i, text in enumerate(texts):
        for word in set(_words(text)):
            rows.append(i)
            cols.append(vocabulary.setdefault(word, len(vocabulary)))
    data = np.ones(len(rows), dtype=np.float32)
    return sp.csr_matrix((data, (rows, cols)), shape=(len(texts), len(vocabulary))), vocabulary


@dataclass(frozen=True)
class Item:
    """One linearised evidence item."""

    item_id: str  # N1, R3, M2, T1
    kind: str
    key: str | None  # node key (None for relationships)
    text: str
    tokens: int


def linearise(graph: HugragGraph, chosen: dict[int, int],
              relationships: list[tuple[str, int]]) -> list[Item]:
    """Evidence items with short ids: modules, entities, relationships, then text."""
    items: list[Item] = []
    for kind in ("module", "entity"):
        nodes = [graph.nodes[i] for i in chosen if graph.nodes[i].kind == kind]
        items += [Item(f"{PREFIX[kind]}{n + 1}", kind, node.key, node.text, node.tokens)
                  for n, node in enumerate(nodes)]
    items += [Item(f"R{n + 1}", "relationship", None, text, tokens)
              for n, (text, tokens) in enumerate(relationships)]
    chunks = [graph.nodes[i] for i in chosen if graph.nodes[i].kind == "chunk"]
    items += [Item(f"T{n + 1}", "chunk", node.key, node.text, node.tokens)
              for n, node in enumerate(chunks)]
    return items


def filter_schema(ids: list[str], spurious_aware: bool) -> dict[str, Any]:
    """The causal filter's JSON schema: id lists are enums of the ids shown."""
    id_list = {"type": "array", "items": {"enum": ids}, "maxItems": MAX_IDS}
    properties: dict[str, Any] = {"precise": id_list}
    if spurious_aware:
        properties["ct_precise"] = id_list
        properties["p_answer"] = {"type": "string", "maxLength": 480}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def filter_prompt(question: str, items: list[Item], spurious_aware: bool) -> str:
    instruction = FILTER_SPURIOUS_AWARE if spurious_aware else FILTER_STANDARD
    evidence = "\n".join(f"{item.item_id}: {' '.join(item.text.split())}" for item in items)
    return f"{instruction}\n\nQuestion: {question}\n\nEvidence:\n{evidence}\n\nJSON:"


def evidence_text(items: list[Item]) -> str:
    return "\n\n".join(item.text for item in items)


class HugragStrategy:
    """HugRAG retrieval over one hierarchy build (see the module docstring)."""

    def __init__(self, config: dict[str, Any], graph: HugragGraph, resources: Resources,
                 ppr: PprSearch | None = None) -> None:
        self.config, self.graph, self.ppr = config, graph, ppr
        # PPR graph entity node → this graph's entity node (title entities have none)
        self.walked: dict[int, int] = {}
        if ppr is not None:
            for i, node in enumerate(graph.nodes):
                found = ppr.graph.named(node.key) if node.kind == "entity" else None
                if found is not None:
                    self.walked.setdefault(found, i)
        self.llm, self.prompt_style = resources.llm, resources.prompt_style
        self.tokenizer = resources.tokenizer
        self.weights = dict(config["weights"])
        allowed = {"structural", "relationship"}
        if config["use_hierarchy"]:
            allowed.add("membership")
            if config["use_gates"]:
                allowed.add("gate")
        self.allowed = frozenset(allowed)

    @staticmethod
    def needs(config: dict[str, Any]) -> dict[str, str]:
        why = "hugrag retrieves over a hierarchy build"
        needs = {"hierarchy": graph_step(config, "hierarchy", "hierarchy", why), "dense": "dense"}
        if config.get("entity_seeds") == "ppr":  # the walk reads the chunk titles
            needs["chunks"] = "chunks"
        if config["use_hierarchy"]:
            needs["summaries"] = graph_step(config, "hierarchy", "summaries", why)
            if config["use_gates"]:
                needs["gates"] = graph_step(config, "hierarchy", "gates", why)
        return needs

    @staticmethod
    def uses_llm(config: dict[str, Any]) -> bool:
        return bool(config["causal_filter"])

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> HugragStrategy:
        if config["causal_filter"] and resources.llm is None:
            raise KgragError(f"strategy {config['name']!r}: the causal filter needs an LLM")
        graph = HugragGraph.load(artefacts, resources, use_hierarchy=config["use_hierarchy"],
                                 use_gates=config["use_gates"])
        ppr = None
        if config.get("entity_seeds") == "ppr":
            ppr = PprSearch.load(config, artefacts["hierarchy"], artefacts["dense"],
                                 artefacts["chunks"], resources)
        return cls(config, graph, resources, ppr)

    def _expand(self, seeds: list[int], scores: np.ndarray, allowed: frozenset[str]
                ) -> tuple[dict[int, int], int]:
        c = self.config
        return self.graph.expand(seeds, scores, c["budget_tokens"], weights=self.weights,
                                 decay=c["hop_decay"], max_hops=c["max_hops"],
                                 fan_out=c["fan_out"], allowed=allowed)

    def reached(self, chosen: dict[int, int]) -> dict[str, int]:
        """Entity name → hop for the entities an expansion chose."""
        return {self.graph.nodes[i].key: hop for i, hop in chosen.items()
                if self.graph.nodes[i].kind == "entity"}

    def retrieve(self, question: str, vector: np.ndarray) -> Context:
        c, graph = self.config, self.graph
        scores = graph.scores(question, vector, c["semantic_weight"])
        trace: dict[str, Any] = {}
        seeds = self._ppr_seeds(question, vector, trace) if self.ppr is not None else []
        if not seeds:
            seeds = [i for i in graph.mmr(scores, "entity", c["seed_entities"], c["mmr_lambda"])
                     if scores[i] > 0]
        if c["use_hierarchy"]:
            seeds += [i for i in graph.mmr(scores, "module", c["seed_modules"], c["mmr_lambda"])
                      if scores[i] > 0]
        if not seeds:  # nothing in the graph relates to the question at all
            trace["fallback"] = "no seed matches the question: seeded from the best chunks"
            seeds = graph.mmr(scores, "chunk", c["seed_entities"] + c["seed_modules"],
                              c["mmr_lambda"])
        chosen, used = self._expand(seeds, scores, self.allowed)
        relationships, _ = graph.relationships_among(chosen, c["budget_tokens"] - used)
        items = linearise(graph, chosen, relationships)
        trace |= {"seeds": [graph.nodes[i].key for i in seeds],
                  "reached": self.reached(chosen), "items": len(items)}
        if "gate" in self.allowed:
            without, _ = self._expand(seeds, scores, self.allowed - {"gate"})
            trace["reached_without_gates"] = self.reached(without)
        kept, calls, llm_ms = items, (0, 0, 0), 0.0
        trace["filter"] = "off"
        if c["causal_filter"] and not items:
            trace["filter"] = "skipped: no evidence item fits the budget"
        elif c["causal_filter"]:
            started = time.perf_counter()
            kept, trace["filter"], calls = self._causal_filter(question, items)
            llm_ms = (time.perf_counter() - started) * 1000
            trace["kept"] = len(kept)
        unit_ids = [item.key for item in kept if item.kind == "chunk"]
        text = evidence_text(kept)
        return Context(unit_ids, [graph.chunk_docs[u] for u in unit_ids], text,
                       self.tokenizer.count(text), trace=trace, llm_calls=calls[0],
                       llm_tokens_in=calls[1], llm_tokens_out=calls[2], llm_ms=llm_ms)

    def _ppr_seeds(self, question: str, vector: np.ndarray, trace: dict[str, Any]
                   ) -> list[int]:
        """The ``seed_entities`` entities with the most PPR mass from the question's
        entities (none when no entity links: MMR seeds instead, and ``trace`` says so)."""
        assert self.ppr is not None
        mass, _, walk = self.ppr.run(question, vector)
        if mass is None:
            trace["fallback"] = "no entity of the question is in the graph: MMR entity seeds"
            return []
        trace["ppr_seeds"] = walk["seeds"]
        nodes = list(self.walked)
        best = np.argsort(-mass[nodes], kind="stable")[: self.config["seed_entities"]]
        return [self.walked[nodes[k]] for k in best if mass[nodes[k]] > 0]

    def _causal_filter(self, question: str, items: list[Item]
                       ) -> tuple[list[Item], str, tuple[int, int, int]]:
        """The items kept, what happened (ok / a fallback), and (requests, tokens in, out)."""
        spurious_aware = self.config["filter_prompt"] == "spurious_aware"
        schema = filter_schema([item.item_id for item in items], spurious_aware)
        prompt = filter_prompt(question, items, spurious_aware)
        before = self.llm.usage.snapshot()
        try:
            value, _ = self.llm.ask_json(prompt, schema, style=self.prompt_style,
                                         max_tokens=FILTER_MAX_TOKENS)
            precise = set(value["precise"])
            outcome = "ok" if precise else "fallback: empty precise list, all evidence kept"
        except InvalidOutput:
            precise, outcome = set(), "fallback: output never parsed, all evidence kept"
        spent = self.llm.usage.since(before)
        calls = (spent.calls + spent.cache_hits, spent.tokens_in, spent.tokens_out)
        kept = [item for item in items if item.item_id in precise] or items
        return kept, outcome, calls
