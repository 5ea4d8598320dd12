"""Cross-references between a spec's graph builds and query strategies.

The schema lists every parameter any graph kind, strategy or extraction method
takes; which of them apply to which kind or method, and which graph a strategy
may name, is checked here, so that a parameter that would silently do nothing
(``tau`` on a skeleton, ``theta`` on ``naive``, ``max_entities`` with method
``nlp`` or ``hybrid``) is an error rather than a no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

GRAPH_PARAMS = {
    "skeleton": {"beta", "select", "knn_k", "seed", "summarise_descriptions",
                 "relationship_vectors"},
    "bipartite": {"tau"},
    "entities": set(),
    "hierarchy": {"fuzzy", "cosine", "max_cluster_size", "max_levels", "seed", "gate_top_m",
                  "gate_min_similarity", "summary_entities", "summaries", "gate_judge",
                  "gate_judge_similarity"},
}
# A personalised-PageRank walk's parameters: strategy ppr's, and those of the ppr
# channels of ket (skeleton_search: ppr) and hugrag (entity_seeds: ppr).
PPR_WALK = {"damping", "max_iterations", "dense_seeds", "dense_seed_chunks", "titles",
            "specific_steps", "question_mentions", "nearest_names", "synonyms"}
# strategy → (its switch, the value that makes it walk): only then does it take PPR_WALK
PPR_CHANNELS = {"ket": ("skeleton_search", "ppr"), "hugrag": ("entity_seeds", "ppr")}
# Parameters added after specs landed, with no schema default: absent means off, and a
# value that means off is dropped, so the configs (and fingerprints) of specs that do
# not use them stay as they were.
OFF_VALUES = {"skeleton_search": "local", "entity_seeds": "mmr", "question_mentions": False}
STRATEGY_PARAMS = {
    "naive": {"top_k"},
    "ket": {"theta", "skeleton", "bipartite", "top_entities", "skeleton_search"},
    "knng": {"top_k", "skeleton"},
    "hybrid": {"theta", "skeleton", "top_entities"},
    "hugrag": {"hierarchy", "seed_entities", "seed_modules", "mmr_lambda", "semantic_weight",
               "hop_decay", "max_hops", "fan_out", "weights", "use_gates", "use_hierarchy",
               "causal_filter", "filter_prompt", "entity_seeds"},
    "bm25": set(),
    "fusion": {"fuse", "rrf_k"},
    "ppr": {"skeleton", "hierarchy", "entities"} | PPR_WALK,
}
# ``model`` and ``prompt`` serve every method: the extraction LLM also writes description
# summaries and HugRAG's module summaries and gate checks.
EXTRACTION_PARAMS = {
    "llm": {"model", "prompt", "max_tokens", "max_entities", "max_relationships",
            "keep_ungrounded"},
    "nlp": {"model", "prompt", "pipeline"},
    "hybrid": {"model", "prompt", "pipeline", "max_relationships"},
}
THETA_DEFAULTS = {"ket": 0.4, "hybrid": 0.5}  # KET-RAG's θ; Hybrid-RAG's equal split
COMMON_GRAPH = {"name", "kind"}
COMMON_STRATEGY = {"name", "strategy", "budget_tokens", "questions"}

Problem = tuple[tuple[Any, ...], str]


def reference_problems(raw: dict[str, Any], filled: dict[str, Any]) -> Iterator[Problem]:
    """(key path, message) for every misplaced parameter or dangling graph reference.

    ``raw`` is what the user wrote (to see which parameters were set explicitly);
    ``filled`` has the defaults (to see the effective θ).
    """
    method = filled["extraction"]["method"]
    yield from _misplaced(("extraction",), raw.get("extraction", {}),
                          EXTRACTION_PARAMS[method] | {"method"}, f"extraction method {method}")
    kinds: dict[str, str] = {}
    entries = {q["name"]: q["strategy"] for q in raw.get("query", [])}
    for i, graph in enumerate(raw.get("graphs", [])):
        if graph["name"] in kinds:
            yield ("graphs", i, "name"), f"duplicate graph name '{graph['name']}'"
        kinds[graph["name"]] = graph["kind"]
        yield from _misplaced(("graphs", i), graph, GRAPH_PARAMS[graph["kind"]] | COMMON_GRAPH,
                              f"a {graph['kind']} graph")
        if "gate_judge_similarity" in graph and graph.get("gate_judge") != "similarity":
            yield (("graphs", i, "gate_judge_similarity"),
                   ("gate_judge_similarity is the threshold of gate_judge: similarity; set "
                   "that too, or drop it (the llm judge answers yes or no)"))
    for i, (q_raw, q) in enumerate(zip(raw.get("query", []), filled["query"])):
        strategy = q["strategy"]
        what = f"strategy {strategy}"
        if strategy in PPR_CHANNELS and not walks(q):
            what += " unless {}: {}".format(*PPR_CHANNELS[strategy])
        yield from _misplaced(("query", i), q_raw, strategy_params(q) | COMMON_STRATEGY, what)
        yield from _seed_problems(i, q, method)
        theta = q.get("theta", THETA_DEFAULTS.get(strategy, 0.0))
        thetas = theta if isinstance(theta, list) else [theta]
        if strategy == "ket" and walks(q) and max(thetas) == 0:
            yield (("query", i, "skeleton_search"),
                   ("skeleton_search ranks the skeleton channel, and theta 0 gives it no "
                    "budget; raise theta or drop skeleton_search"))
        wanted = []
        if strategy in ("knng", "hybrid") or (strategy == "ket" and max(thetas) > 0):
            wanted.append(("skeleton", "skeleton"))
        if strategy == "ket" and min(thetas) < 1:
            wanted.append(("bipartite", "bipartite"))
        if strategy == "hugrag":
            wanted.append(("hierarchy", "hierarchy"))
        if strategy == "ppr":
            named = [key for key in ("skeleton", "hierarchy", "entities") if q[key] is not None]
            if len(named) != 1:
                yield ("query", i), ("strategy ppr walks one graph: set one of 'skeleton', "
                                     "'hierarchy' or 'entities' to the name of a graph build")
            wanted += [(key, key) for key in named]
        if strategy == "fusion":
            yield from _fusion_problems(i, q_raw, entries)
        for key, kind in wanted:
            name = q[key]
            if name is None:
                yield ("query", i), _missing(strategy, key, kind, thetas)
            elif kinds.get(name) != kind:
                known = [g for g, k in kinds.items() if k == kind]
                yield ("query", i, key), (f"no {kind} graph named '{name}' in graphs "
                                          f"(known: {', '.join(known) or 'none'})")


def walks(query: dict[str, Any]) -> bool:
    """Whether a strategy entry walks by personalised PageRank (ppr, or a ppr channel)."""
    if query["strategy"] == "ppr":
        return True
    switch = PPR_CHANNELS.get(query["strategy"])
    return switch is not None and query.get(switch[0]) == switch[1]


def strategy_params(query: dict[str, Any]) -> set[str]:
    """The parameters a strategy entry takes: its strategy's, and a walk's when it walks."""
    return STRATEGY_PARAMS[query["strategy"]] | (PPR_WALK if walks(query) else set())


def prune_defaults(filled: dict[str, Any]) -> dict[str, Any]:
    """Drop the defaults the schema filled in for parameters that do not apply to an
    item's kind, and the off values of ``OFF_VALUES``, so configs (and fingerprints)
    carry only what an item uses, and fill θ, whose default depends on the strategy."""
    graphs = [{k: v for k, v in g.items() if k in GRAPH_PARAMS[g["kind"]] | COMMON_GRAPH}
              for g in filled["graphs"]]
    query = [{k: v for k, v in q.items()
              if k in strategy_params(q) | COMMON_STRATEGY
              and not (k in OFF_VALUES and v == OFF_VALUES[k])}
             for q in filled["query"]]
    for q in query:
        if q["strategy"] in THETA_DEFAULTS:
            q.setdefault("theta", THETA_DEFAULTS[q["strategy"]])
    return {**filled, "graphs": graphs, "query": query}


def _seed_problems(i: int, q: dict[str, Any], method: str) -> Iterator[Problem]:
    """The question-mention options need the nlp extraction's pipeline, and the nearest-name
    fallback needs mentions to link."""
    if q.get("question_mentions") and method != "nlp":
        yield ("query", i, "question_mentions"), (
            "question_mentions finds mentions with the nlp extraction's spaCy pipeline; set "
            "extraction: {method: nlp}")
    if q.get("nearest_names") and not q.get("question_mentions"):
        yield ("query", i, "nearest_names"), (
            "nearest_names links question mentions no name matches; set question_mentions: "
            "true")


def _fusion_problems(i: int, q: dict[str, Any], entries: dict[str, str]) -> Iterator[Problem]:
    """``fuse`` must name two different entries that rank chunks."""
    from kgrag.retrieval import RANKERS  # the strategies with a ranking, declared once there

    rankers = sorted(RANKERS)
    members = q.get("fuse")
    if members is None:
        yield ("query", i), "strategy fusion needs 'fuse': the names of two other query entries"
        return
    if len(set(members)) != len(members):
        yield ("query", i, "fuse"), "fusion needs two different entries"
    for j, member in enumerate(members):
        if member not in entries:
            yield ("query", i, "fuse", j), (f"no query entry named '{member}' (known: "
                                            f"{', '.join(entries)})")
        elif entries[member] not in rankers:
            yield ("query", i, "fuse", j), (f"'{member}' is a {entries[member]} entry; fusion "
                                            f"fuses rankings of {', '.join(rankers)} entries")


def _misplaced(path: tuple[Any, ...], item: dict[str, Any], allowed: set[str], what: str
               ) -> Iterator[Problem]:
    for key in item:
        if key not in allowed:
            yield (*path, key), f"'{key}' is not a parameter of {what}"


def _missing(strategy: str, key: str, kind: str, thetas: list[float]) -> str:
    if strategy == "ket":
        why = "θ > 0 needs a skeleton" if kind == "skeleton" else "θ < 1 needs a bipartite graph"
        return f"strategy ket with theta {thetas}: {why}; set '{key}' to a {kind} graph name"
    return f"strategy {strategy} needs '{key}': the name of a {kind} graph"
