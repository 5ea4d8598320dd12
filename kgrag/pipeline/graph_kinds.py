"""Graph kinds, each declared once: its parameters and the steps it compiles to (the
extraction methods their ``extract`` steps run are ``kgrag.graphs.extraction.methods``).

A graph build's steps are named ``<artefact>.<build label>`` (``step_name``), so a
strategy names the artefact it reads (a ``GraphRef``) and its declaration finds the step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kgrag.contents.bipartite import keyword_degrees
from kgrag.contents.entities import entity_degrees
from kgrag.declarations import Config, GraphKind, GraphView, Param, Problem, step_name
from kgrag.limits import COUNT_MAX, ITEMS_MAX, SEED_MAX
from kgrag.pipeline.plan import Plan


@dataclass(frozen=True)
class BuildEnv:
    """What every build variant's steps share: the embedder's identity, the ``extract``
    config, the knowledge-building LLM work and whether chunks render with titles."""

    embedder: str
    extraction: Config
    llm_work: Config
    titled: bool


def _skeleton(plan: Plan, name: str, cfg: Config, env: BuildEnv) -> None:
    core = plan.add(step_name("core", name), "core",
                    {k: cfg[k] for k in ("beta", "select", "knn_k", "seed")}
                    | {"embedder": env.embedder}, {"chunks": "chunks"})
    extract = plan.add(step_name("extract", name), "extract",
                       {**env.extraction, "beta": cfg["beta"]},
                       {"chunks": "chunks", "core": core.name})
    summarise = {"summarise": env.llm_work} if cfg["summarise_descriptions"] else {}
    # in the config only when off, so the default builds keep their fingerprints
    unembedded = {} if cfg["relationship_vectors"] else {"relationship_vectors": False}
    plan.add(step_name("skeleton", name), "skeleton",
             {"embedder": env.embedder, **summarise, **unembedded}, {"extract": extract.name})


def _bipartite(plan: Plan, name: str, cfg: Config, env: BuildEnv) -> None:
    # sub-chunks render like their chunks; ``title`` is in the config only when false, so
    # the fingerprints of titled builds (the default) stay as they were
    untitled = {} if env.titled else {"title": False}
    plan.add(step_name("bipartite", name), "bipartite",
             {"tau": cfg["tau"], "embedder": env.embedder, **untitled}, {"chunks": "chunks"})


def _entities(plan: Plan, name: str, cfg: Config, env: BuildEnv) -> None:
    plan.add(step_name("extract", name), "extract", {**env.extraction, "beta": 1.0},
             {"chunks": "chunks"})


def _hierarchy(plan: Plan, name: str, cfg: Config, env: BuildEnv) -> None:
    """HugRAG's build: extraction on every chunk, hierarchy, module summaries, gates.

    Summaries and gate checks are knowledge-building LLM work, so they use the
    extraction LLM and its prompt style, whatever the extraction method. The no-LLM
    options (``summaries: extractive``, ``gate_judge: similarity``) name no LLM in their
    step's config, and the LLM path's config is what it was before they existed, so
    landed specs keep their fingerprints.
    """
    _entities(plan, name, cfg, env)
    # the salience rule is in the config only when on, so landed builds keep their
    # fingerprints
    salience = {k: cfg[k] for k in SALIENCE_KEYS} if cfg["salient_min_chunks"] else {}
    resolution = {} if cfg["resolution"] == 1.0 else {"resolution": cfg["resolution"]}
    hierarchy = plan.add(
        step_name("hierarchy", name), "hierarchy",
        {k: cfg[k] for k in ("fuzzy", "cosine", "max_cluster_size", "max_levels", "seed")}
        | salience | resolution | {"embedder": env.embedder},
        {"extract": step_name("extract", name)})
    writer = {"method": "extractive"} if cfg["summaries"] == "extractive" else env.llm_work
    summaries = plan.add(step_name("summaries", name), "summarise",
                         {"summary_entities": cfg["summary_entities"],
                          "embedder": env.embedder, **writer}, {"hierarchy": hierarchy.name})
    judge = ({"judge": "similarity", "threshold": cfg["gate_judge_similarity"]}
             if cfg["gate_judge"] == "similarity" else env.llm_work)
    plan.add(step_name("gates", name), "gates",
             {"top_m": cfg["gate_top_m"], "min_similarity": cfg["gate_min_similarity"], **judge},
             {"hierarchy": hierarchy.name, "summaries": summaries.name})


SALIENCE_KEYS = ("salient_min_chunks", "salient_max_share", "relationships_per_entity")


def _hierarchy_problems(index: int, graph: Config) -> Iterator[Problem]:
    for key in SALIENCE_KEYS[1:]:
        if key in graph and not graph.get("salient_min_chunks"):
            yield (("graphs", index, key),
                   (f"{key} is a setting of the salience rule; set salient_min_chunks too "
                    "(at least 1), or drop it"))
    if "gate_judge_similarity" in graph and graph.get("gate_judge") != "similarity":
        yield (("graphs", index, "gate_judge_similarity"),
               ("gate_judge_similarity is the threshold of gate_judge: similarity; set that "
                "too, or drop it (the llm judge answers yes or no)"))


SEED = {"type": "integer", "minimum": 0, "maximum": SEED_MAX}

GRAPH_KINDS: dict[str, GraphKind] = {kind.name: kind for kind in (
    GraphKind("skeleton", "KET-RAG's KG skeleton (KNN chunk graph, core chunks by PageRank "
              "or uniformly, LLM extraction on the core only).", (
        Param("beta", {"type": "number", "minimum": 0, "maximum": 1},
              "fraction β of chunks chosen as core chunks for LLM extraction.", default=0.8,
              sweep=True),
        Param("select", {"enum": ["pagerank", "uniform"]},
              "how core chunks are chosen: pagerank (KET-RAG-P) or uniform (KET-RAG-U).",
              default="pagerank"),
        Param("knn_k", {"type": "integer", "minimum": 2, "maximum": 1000, "multipleOf": 2},
              "K, neighbours per chunk in the KNN graph (K/2 lexical + K/2 semantic); even.",
              default=2, sweep=True),
        Param("relationship_vectors", {"type": "boolean"},
              "embed every relationship ('source -- target: description') into the build's "
              "LanceDB store, for users to search; no strategy reads these vectors. false "
              "skips them: the nlp extraction finds dozens of relationships per chunk, a long "
              "embedding per sample on a CPU.", default=True),
        Param("summarise_descriptions", {"type": "boolean"},
              "one LLM call (the extraction LLM) writes a single description for every "
              "entity and relationship whose descriptions come from several chunks, as "
              "GraphRAG does; off, they stay joined by '; '.", default=False),
        Param("seed", SEED, "seed of the uniform selection.", default=42)), _skeleton,
        GraphView("skeleton", "entities", entity_degrees)),
    GraphKind("bipartite", "KET-RAG's keyword–sub-chunk graph (no LLM).", (
        Param("tau", {"type": "integer", "minimum": 0, "maximum": 6},
              "each chunk is split into 2^τ sub-chunks, the keyword graph's text units.",
              default=0, sweep=True),), _bipartite,
        GraphView("bipartite", "keywords", keyword_degrees)),
    GraphKind("hierarchy", "HugRAG's hierarchical causal graph (LLM extraction on every "
              "chunk, two-stage canonicalisation, recursive Leiden modules, an LLM summary "
              "per module, LLM-checked causal gates between distant modules).", (
        Param("fuzzy", {"type": "number", "minimum": 0, "maximum": 1},
              "entity names at least this similar (rapidfuzz ratio, 0–1) merge in "
              "canonicalisation stage 1.", default=0.92),
        Param("cosine", {"type": "number", "minimum": 0, "maximum": 1},
              "entities whose name embeddings have at least this cosine merge in "
              "canonicalisation stage 2.", default=0.93),
        Param("max_cluster_size", {"type": "integer", "minimum": 2, "maximum": COUNT_MAX},
              "a module with more entities is split again by Leiden at the next level.",
              default=10),
        Param("max_levels", {"type": "integer", "minimum": 1, "maximum": 8},
              "levels of modules at most (level 0 is the coarsest).", default=4),
        Param("resolution", {"type": "number", "exclusiveMinimum": 0},
              "Leiden's resolution (1: modularity); below 1 makes larger modules, fewer "
              "of them, as on the sparse graphs of the salience rule.", default=1.0),
        Param("seed", SEED, "seed of Leiden.", default=42),
        Param("gate_top_m", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
              "gate candidates of a module are its top-m most similar modules (by summary "
              "embedding) of the level compared.", default=3),
        Param("gate_min_similarity", {"type": "number", "minimum": -1, "maximum": 1},
              "gate candidates need at least this summary cosine.", default=0.5),
        Param("gate_judge", {"enum": ["llm", "similarity"]},
              "who decides whether a candidate module pair is a causal gate: llm (one yes / "
              "no call of the extraction LLM per check) or similarity (no LLM: yes when the "
              "two summaries' cosine is at least gate_judge_similarity).", default="llm"),
        Param("gate_judge_similarity", {"type": "number", "minimum": -1, "maximum": 1},
              "gate_judge similarity only: the summary cosine at or above which a candidate "
              "pair is a gate.", default=0.7),
        Param("summary_entities", {"type": "integer", "minimum": 1, "maximum": 50},
              "member entities (most connected first) and as many relationships shown to the "
              "LLM when it summarises a module.", default=12),
        Param("summaries", {"enum": ["llm", "extractive"]},
              "how a module's title and summary are written: llm (one constrained call of the "
              "extraction LLM per module) or extractive (no LLM: the title names the three "
              "most connected members, the summary is their first sentences, as much as an "
              "LLM summary may hold; for the thousands of modules of a whole corpus).",
              default="llm"),
        Param("salient_min_chunks", {"type": "integer", "minimum": 0, "maximum": COUNT_MAX},
              "salience rule (no LLM, for the nlp extraction): an entity is a node only when "
              "at least this many chunks mention it (after canonicalisation), and its "
              "relationships are thinned to relationships_per_entity; 0 keeps every "
              "extracted entity and relationship.", default=0, sweep=True),
        Param("salient_max_share", {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
              "salience rule: an entity mentioned in more than this share of all chunks is "
              "generic ('study', 'results'), not a node.", default=0.02),
        Param("relationships_per_entity", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
              "salience rule: a relationship between salient entities is kept when it is "
              "among the strongest this many of either endpoint (edges stay within this "
              "many times the nodes).", default=2, sweep=True)), _hierarchy,
        GraphView("hierarchy", "canonical entities", entity_degrees), _hierarchy_problems),
    GraphKind("entities", "the extraction on every chunk and nothing else (no vectors, no LLM "
              "beyond extraction), the entity–chunk graph a ppr strategy walks.", (),
              _entities, GraphView("extract", "entities", entity_degrees)),
)}

