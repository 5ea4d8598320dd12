"""Strategy ``ket``: KET-RAG retrieval (Alg. 4) and the baselines that are its special cases.

The budget λ is split by θ. The keyword channel (Keyword-RAG, the mimicked local
search on the text–keyword bipartite graph) gets B = int(λ(1−θ)); GraphRAG local
search on the KG skeleton (``local_search``) gets the rest. The special cases are
configurations, not code: θ=0 is Keyword-RAG, θ=1 on a β<1 skeleton is
Skeleton-RAG, θ=1 on a β=1 skeleton is GraphRAG local search.

Keyword channel, following the authors' code where the paper is loose:

* Keywords are ranked by cosine to the question (their vectors are unnormalised
  sentence means; the authors' inner product would favour keywords whose sentences
  agree, cosine ranks by meaning alone), and at most 1000 are looked at.
* Each keyword in turn adds its sub-chunks to a candidate pool in descending
  question similarity, skipping ones already pooled. Everything stops at the first
  sub-chunk that would take the pool past 2B tokens (a pool of exactly 2B is kept).
* The pool is re-sorted by similarity and fills B greedily.

Budget flow (authors' code): the keyword channel runs first and the skeleton gets
λ minus what the keyword context actually took, so B it leaves unused is not lost.
The context is the skeleton's sections first, then a ``-----Keyword sources-----``
section. A sub-chunk the keyword channel took is not repeated in the skeleton's
``-----Sources-----``; the saved tokens go to further skeleton text units.

Text units are the sub-chunks of the bipartite build whenever the strategy reads
one (θ<1), and the skeleton is then rewired to them; at θ=1 no bipartite graph is
read and the skeleton's text units are the chunks themselves.

``skeleton_search: ppr`` (not in the paper) ranks the skeleton channel by
personalised PageRank instead of local search, within the same θ split: the
skeleton's extraction is walked from the question's entities exactly as strategy
``ppr`` walks it (``PprSearch``: seeds, titles, specificity, dense fallback), and
its chunks, best first and rewired to sub-chunks, fill the skeleton's share as one
``-----Sources-----`` section. It reads the skeleton at its extraction, so it needs
neither the skeleton's entity vectors nor local search's tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from kgrag.contents.bipartite import (
    EDGES_FILE,
    SUBCHUNKS_FILE,
    open_keyword_vectors,
    open_subchunk_vectors,
    read_edges,
    read_subchunks,
)
from kgrag.contents.chunks import UNIT_COLUMNS
from kgrag.declarations import Config, GraphRef, Group, Need, Param, Problem, Strategy
from kgrag.errors import KgragError
from kgrag.retrieval.layout import (
    SOURCES_HEADER,
    TEXT_JOINER,
    Layout,
    Section,
    best_first,
    check_theta,
    share,
)
from kgrag.retrieval.local_search import LocalContext, LocalSearch, children_of
from kgrag.retrieval.params import GRAPH_NAME, SKELETON, TOP_ENTITIES, theta
from kgrag.retrieval.ppr_search import PprSearch
from kgrag.retrieval.units import Evidence, Units
from kgrag.retrieval.walk_params import WALK_PARAMS, walk_problems

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

KEYWORD_HEADER = "-----Keyword sources-----"
KEYWORDS_SEARCHED = 1000


def load_subchunks(folder: Path) -> tuple[Units, dict[str, str]]:
    """The bipartite build's sub-chunks as text units, and each one's parent chunk."""
    table = read_subchunks(folder, [*UNIT_COLUMNS, "parent_chunk_id"])
    return Units.of(table), dict(zip(table["chunk_id"].to_list(),
                                     table["parent_chunk_id"].to_list()))


class KeywordChannel:
    """Keyword-RAG over one bipartite graph, held as matrices and index arrays."""

    def __init__(self, keyword_matrix: np.ndarray, members: list[np.ndarray],
                 subchunk_ids: list[str], subchunk_matrix: np.ndarray, units: Units,
                 layout: Layout) -> None:
        self.keyword_matrix, self.members = keyword_matrix, members
        self.subchunk_ids, self.subchunk_matrix = subchunk_ids, subchunk_matrix
        self.sizes = [units.tokens[s] for s in subchunk_ids]
        self.units, self.layout = units, layout

    @classmethod
    def load(cls, folder: Path, units: Units, layout: Layout) -> KeywordChannel:
        keywords, keyword_matrix = open_keyword_vectors(folder).matrix()
        subchunk_ids, subchunk_matrix = open_subchunk_vectors(folder).matrix()
        if set(subchunk_ids) != units.text.keys():
            raise KgragError(f"the sub-chunk vectors in {folder} do not match {SUBCHUNKS_FILE}")
        edges = (read_edges(folder)
                 .join(pl.DataFrame({"keyword": keywords, "k": range(len(keywords))}),
                       on="keyword", how="left")
                 .join(pl.DataFrame({"subchunk_id": subchunk_ids, "s": range(len(subchunk_ids))}),
                       on="subchunk_id", how="left"))
        if edges["k"].null_count() or edges["s"].null_count():
            raise KgragError(f"{EDGES_FILE} in {folder} names keywords or sub-chunks that have "
                             "no vector")
        edges = edges.sort("k", "s")
        degree = np.bincount(edges["k"].to_numpy(), minlength=len(keywords))
        members = np.split(edges["s"].to_numpy(), np.cumsum(degree)[:-1])
        return cls(keyword_matrix, members, subchunk_ids, subchunk_matrix, units, layout)

    def pool(self, vector: np.ndarray, similarity: np.ndarray, limit: int) -> list[int]:
        """Candidate sub-chunk indices, in the order the keywords brought them, up to
        ``limit`` tokens (see the module docstring)."""
        pooled: dict[int, None] = {}
        size = 0
        for keyword in best_first(self.keyword_matrix @ vector, KEYWORDS_SEARCHED):
            members = self.members[keyword]
            for sub in members[np.argsort(-similarity[members], kind="stable")].tolist():
                if sub in pooled:
                    continue
                size += self.sizes[sub]
                if size > limit:
                    return list(pooled)
                pooled[sub] = None
        return list(pooled)

    def search(self, vector: np.ndarray, budget: int) -> tuple[Section, int]:
        """The keyword section within ``budget`` tokens and the tokens it may take."""
        similarity = self.subchunk_matrix @ vector
        pooled = sorted(self.pool(vector, similarity, 2 * budget),
                        key=lambda sub: -similarity[sub])
        return self.layout.fill(KEYWORD_HEADER, TEXT_JOINER,
                                [self.subchunk_ids[sub] for sub in pooled],
                                self.units.text, self.units.tokens, budget)


class PprChannel:
    """The skeleton channel ranked by personalised PageRank (``skeleton_search: ppr``)."""

    def __init__(self, search: PprSearch, units: Units, children: dict[str, list[str]],
                 layout: Layout) -> None:
        self.ppr, self.units, self.children, self.layout = search, units, children, layout

    def search(self, question: str, vector: np.ndarray, budget: int,
               exclude: frozenset[str] = frozenset()) -> tuple[LocalContext, dict[str, Any]]:
        """The chunks' text units by PPR rank within ``budget``, those in ``exclude`` left
        out, and the walk's trace (seeds, or the dense fallback)."""
        ranked, _, trace = self.ppr.scored(question, vector)
        units = [unit for chunk in ranked for unit in self.children.get(chunk, ())
                 if unit not in exclude]
        sources, used = self.layout.fill(SOURCES_HEADER, TEXT_JOINER, units, self.units.text,
                                         self.units.tokens, budget)
        return LocalContext([], [], sources.ids, [sources], used), trace


class KetStrategy:
    """KET-RAG: skeleton local search (or PPR) plus keyword retrieval, split by θ."""

    def __init__(self, budget: int, theta: float, skeleton: LocalSearch | PprChannel | None,
                 keywords: KeywordChannel | None, units: Units, layout: Layout) -> None:
        self.budget, self.theta = budget, theta
        self.skeleton, self.keywords, self.units, self.layout = skeleton, keywords, units, layout

    @classmethod
    def load(cls, config: dict[str, Any], artefacts: dict[str, Path], resources: Resources
             ) -> KetStrategy:
        layout = Layout(resources.tokenizer)
        units, parent_of, keywords = resources.chunks, None, None
        if "bipartite" in artefacts:
            units, parent_of = load_subchunks(artefacts["bipartite"])
            keywords = KeywordChannel.load(artefacts["bipartite"], units, layout)
        skeleton: LocalSearch | PprChannel | None = None
        if "skeleton" in artefacts:
            skeleton = LocalSearch.load(artefacts["skeleton"], units, layout,
                                        parent_of=parent_of, top_entities=config["top_entities"])
        elif "graph" in artefacts:
            search = PprSearch.load(config, artefacts["graph"], artefacts["dense"],
                                    artefacts["chunks"], resources)
            skeleton = PprChannel(search, units, children_of(units, parent_of), layout)
        return cls(config["budget_tokens"], config["theta"], skeleton, keywords, units, layout)

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        vector = vector.astype(np.float32)
        sections: list[Section] = []
        skeleton_units: list[str] = []
        keyword_units: list[str] = []
        trace: dict[str, Any] = {}
        used = 0
        if self.keywords is not None:
            found, used = self.keywords.search(vector, share(1 - self.theta, self.budget))
            sections.append(found)
            keyword_units = found.ids
        if self.skeleton is not None:
            exclude = frozenset(keyword_units)
            if isinstance(self.skeleton, PprChannel):
                local, trace = self.skeleton.search(question, vector, self.budget - used,
                                                    exclude)
            else:
                local = self.skeleton.search(vector, self.budget - used, exclude)
            sections = local.sections + sections
            skeleton_units = local.unit_ids
        unit_ids = skeleton_units + keyword_units
        text, tokens = self.layout.render(sections)
        return Evidence(unit_ids, [self.units.doc[u] for u in unit_ids], text, tokens, trace)


def _needs(config: Config) -> dict[str, Need]:
    theta = check_theta(config)
    needs: dict[str, Need] = {}
    if theta > 0:
        why = f"theta={theta} gives the skeleton part of the budget"
        if config.get("skeleton_search") == "ppr":  # the walk reads the extraction
            needs |= {"graph": GraphRef("skeleton", "extract", why), "dense": "dense",
                      "chunks": "chunks"}
        else:
            needs["skeleton"] = GraphRef("skeleton", "skeleton", why)
    if theta < 1:
        needs["bipartite"] = GraphRef("bipartite", "bipartite",
                                      f"theta={theta} gives keywords part of the budget")
    return needs


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    thetas = entry["theta"] if isinstance(entry["theta"], list) else [entry["theta"]]
    if entry.get("skeleton_search") == "ppr" and max(thetas) == 0:
        yield (("query", index, "skeleton_search"),
               ("skeleton_search ranks the skeleton channel, and theta 0 gives it no budget; "
                "raise theta or drop skeleton_search"))
    yield from walk_problems(index, entry, spec)


DECLARATION = Strategy(
    "ket", "KET-RAG (θ of the budget to local search on a skeleton, the rest to the keyword "
    "graph; θ=0 keyword-RAG, θ=1 skeleton-RAG / GraphRAG-local).",
    (theta(0.4, "KET-RAG's setting"), SKELETON,
     Param("bipartite", GRAPH_NAME, "name of a bipartite graph build.", default=None),
     TOP_ENTITIES,
     Param("skeleton_search", {"enum": ["local", "ppr"]},
           "how the skeleton channel ranks within its θ share. local (KET-RAG: GraphRAG local "
           "search over the skeleton's entity and relationship vectors) or ppr (not in the "
           "paper: the skeleton's extraction walked by personalised PageRank from the "
           "question's entities, as strategy ppr walks it, its chunks rewired to sub-chunks; "
           "reads the extraction, not the skeleton's vectors, and takes ppr's damping, "
           "dense_seeds, titles and seed options). Left out: local.", off="local")),
    KetStrategy, _needs, groups=(Group("skeleton_search", "ppr", WALK_PARAMS),),
    problems=_problems)
