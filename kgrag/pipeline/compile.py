"""Compile a spec into a plan: graph builds, strategies and sweeps become steps.

A parameter given as a list (a graph's β, K, τ; a strategy's θ or budget) is a
sweep: every combination becomes its own graph variant or strategy row, named
``<name>@key=value,…`` (no brackets: they are glob characters to parquet readers), and each reuses every upstream step it shares with the
others, because shared steps get identical fingerprints.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from kgrag.errors import KgragError
from kgrag.graphs.hybrid_extraction import HYBRID_VERSION
from kgrag.graphs.nlp_extraction import NLP_EXTRACTOR_VERSION
from kgrag.models import Models
from kgrag.models.registry import file_sha256, folder_sha256
from kgrag.pipeline.plan import Plan
from kgrag.retrieval import STRATEGIES, uses_llm
from kgrag.spec import Spec, thaw

BENCHMARK_SHAPES = ("musique", "hotpotqa", "2wiki", "holisqa")
SWEEPABLE_GRAPH = ("beta", "knn_k", "tau")
SWEEPABLE_QUERY = ("budget_tokens", "theta")


def has_questions(spec: Spec) -> bool:
    """Whether the run evaluates: benchmark datasets carry questions, and a jsonl or text
    corpus has them when it names a ``questions_file``."""
    return spec.corpus["dataset"] in BENCHMARK_SHAPES or "questions_file" in spec.corpus


def variants(item: dict[str, Any], keys: tuple[str, ...]) -> list[tuple[dict[str, Any], dict]]:
    """(swept values, concrete config) for every combination of the list-valued ``keys``."""
    swept = [k for k in keys if isinstance(item.get(k), list)]
    combos = itertools.product(*(item[k] for k in swept))
    return [(dict(zip(swept, c)), {**item, **dict(zip(swept, c))}) for c in combos]


def label(name: str, chosen: dict[str, Any]) -> str:
    return name + (f"@{','.join(f'{k}={v}' for k, v in chosen.items())}" if chosen else "")


def source_sha256(path: Path, what: str = "corpus path") -> str:
    """The content hash of a corpus source, a file or a folder (what fingerprints and
    bundles identify it by); ``what`` names it in messages."""
    try:
        if path.is_file():
            return file_sha256(path)
        if path.is_dir():
            return folder_sha256(path)
    except OSError as exc:  # a name too long, a folder we may not read
        raise KgragError(f"{what} cannot be read: {exc.strerror}: {path}") from None
    raise KgragError(f"{what} does not exist: {path}")


def compile_plan(spec: Spec, models: Models) -> Plan:
    """The steps a spec asks for, each fingerprinted from what changes its output."""
    plan = Plan()
    corpus = {k: v for k, v in thaw(spec.corpus).items() if k not in ("path", "questions_file")}
    corpus["source_sha256"] = source_sha256(spec.resolve(spec.corpus["path"]))
    if "questions_file" in spec.corpus:  # by content, like the documents; absent otherwise
        corpus["questions_sha256"] = source_sha256(spec.resolve(spec.corpus["questions_file"]),
                                                   "corpus.questions_file")
    plan.add("corpus", "import", corpus)
    embedder = models.embedder_model.sha256
    plan.add("chunks", "chunk", {**thaw(spec.chunking), "tokenizer": embedder},
             {"corpus": "corpus"})
    llm = {"sha256": models.llm_model.sha256,
           **{k: spec.models["llm"][k] for k in ("temperature", "top_p", "seed")}}
    graph_variants, builds = _add_graphs(plan, spec, models, llm)
    strategies = [s for q in spec.query for s in _expand_strategy(thaw(q), graph_variants)]
    entries = {q["name"]: thaw(q) for q in spec.query}
    strategies = [(chosen, _resolve_fusion(s, entries, graph_variants))
                  for chosen, s in strategies]
    if any("dense" in STRATEGIES[s["strategy"]].needs(s).values() for _, s in strategies):
        plan.add("dense", "dense_index", {"embedder": embedder}, {"chunks": "chunks"})
    for _, strategy in strategies:
        config = {"strategy": strategy, "embedder": embedder}
        if uses_llm(strategy):
            config |= {"llm": llm, "prompt": spec.answer["prompt"],
                       "max_retries": spec.models["llm"]["max_retries"]}
        if any(s.get("question_mentions") for s in [strategy, *strategy.get("fuse", [])]):
            # questions parsed like the chunks: the pipeline joins the fingerprint
            assert models.pipeline is not None, "the spec check requires method nlp"
            config["pipeline"] = models.pipeline.identity()
        plan.queries[strategy["name"]] = plan.step(
            f"retrieve.{strategy['name']}", "retrieve", config,
            {"corpus": "corpus", "chunks": "chunks",
             **STRATEGIES[strategy["strategy"]].needs(strategy)})
    if not has_questions(spec):
        return plan
    answering = spec.answer["questions"] != 0
    evaluate_inputs = {"corpus": "corpus", "chunks": "chunks"}
    for build in builds:  # each graph build's cost is reported beside the strategies
        evaluate_inputs |= {f"build.{step}": step for step in build["steps"]}
    for _, strategy in strategies:
        name = strategy["name"]
        retrieve = plan.append(plan.queries[name])
        evaluate_inputs[retrieve.name] = retrieve.name
        if strategy["strategy"] == "hugrag":  # its structural metrics read the entities
            evaluate_inputs[f"graph.{name}"] = f"hierarchy.{strategy['hierarchy']}"
        if answering:
            settings = {**thaw(spec.answer), "llm": llm}
            if "questions" in strategy:  # it retrieved for its first N: answer at most those
                settings["questions"] = min(strategy["questions"],
                                            settings["questions"] or strategy["questions"])
            step = plan.add(f"answer.{name}", "answer", settings,
                            {"corpus": "corpus", "retrieve": retrieve.name})
            evaluate_inputs[step.name] = step.name
    plan.add("evaluate", "evaluate",
             {"metrics": list(spec.evaluate["metrics"]), "dataset": spec.corpus["dataset"],
              "strategies": [s for _, s in strategies], "builds": builds,
              "params": {s["name"]: chosen for chosen, s in strategies}}, evaluate_inputs)
    return plan


def _add_graphs(plan: Plan, spec: Spec, models: Models, llm: dict[str, Any]
                ) -> tuple[dict[str, list[tuple[dict[str, Any], str]]], list[dict[str, Any]]]:
    """Steps for every graph build variant. Returns graph name → [(swept values, label)]
    and, per variant, ``{"graph": label, "kind": kind, "steps": [its step names]}``."""
    built: dict[str, list[tuple[dict[str, Any], str]]] = {}
    builds: list[dict[str, Any]] = []
    embedder = models.embedder_model.sha256
    llm_work = {"llm": {**llm, "sha256": models.extraction_model.sha256,
                        "max_retries": spec.models["llm"]["max_retries"]},
                "prompt": spec.extraction["prompt"]}
    extraction = _extraction_config(spec, models, llm_work)
    for graph in map(thaw, spec.graphs):
        for chosen, cfg in variants(graph, SWEEPABLE_GRAPH):
            name = label(graph["name"], chosen)
            before = len(plan.steps)
            if cfg["kind"] == "skeleton":
                core = plan.add(f"core.{name}", "core",
                                {k: cfg[k] for k in ("beta", "select", "knn_k", "seed")}
                                | {"embedder": embedder}, {"chunks": "chunks"})
                extract = plan.add(f"extract.{name}", "extract",
                                   {**extraction, "beta": cfg["beta"]},
                                   {"chunks": "chunks", "core": core.name})
                summarise = {"summarise": llm_work} if cfg["summarise_descriptions"] else {}
                # in the config only when off, so the default builds keep their fingerprints
                unembedded = {} if cfg["relationship_vectors"] else {"relationship_vectors": False}
                plan.add(f"skeleton.{name}", "skeleton",
                         {"embedder": embedder, **summarise, **unembedded},
                         {"extract": extract.name})
            elif cfg["kind"] == "hierarchy":
                _add_hierarchy(plan, name, cfg, extraction, llm_work, embedder)
            elif cfg["kind"] == "entities":  # the extraction alone, as HugRAG's: what ppr walks
                plan.add(f"extract.{name}", "extract", {**extraction, "beta": 1.0},
                         {"chunks": "chunks"})
            else:
                # sub-chunks render like their chunks; ``title`` is in the config only when
                # false, so the fingerprints of titled builds (the default) stay as they were
                untitled = {} if spec.chunking["title"] else {"title": False}
                plan.add(f"bipartite.{name}", "bipartite",
                         {"tau": cfg["tau"], "embedder": embedder, **untitled},
                         {"chunks": "chunks"})
            built.setdefault(graph["name"], []).append((chosen, name))
            builds.append({"graph": name, "kind": cfg["kind"],
                           "steps": [step.name for step in plan.steps[before:]]})
    return built, builds


def _extraction_config(spec: Spec, models: Models, llm_work: dict[str, Any]) -> dict[str, Any]:
    """The ``extract`` steps' config. For method ``llm`` it is exactly what it was before
    the nlp method existed (the extraction settings and the LLM), so that every landed
    spec keeps its fingerprints; for ``nlp`` it is the pipeline's identity and the
    extractor's version, and names no LLM; ``hybrid`` adds to those the LLM, its prompt
    style, the relationship cap and the hybrid step's version."""
    settings = thaw(spec.extraction)
    if settings["method"] in ("nlp", "hybrid"):
        assert models.pipeline is not None, "Models resolves the pipeline of methods nlp, hybrid"
        nlp = {"method": "nlp", "pipeline": models.pipeline.identity(),
               "extractor": NLP_EXTRACTOR_VERSION}
        if settings["method"] == "nlp":
            return nlp
        return {**nlp, "method": "hybrid", "hybrid": HYBRID_VERSION, **llm_work,
                "max_relationships": settings["max_relationships"]}
    return {**{k: v for k, v in settings.items() if k not in ("model", "method", "pipeline")},
            "llm": llm_work["llm"]}


def _add_hierarchy(plan: Plan, name: str, cfg: dict[str, Any], extraction: dict[str, Any],
                   llm: dict[str, Any], embedder: str) -> None:
    """HugRAG's build: extraction on every chunk, hierarchy, module summaries, gates.

    Summaries and gate checks are knowledge-building LLM work, so they use the
    extraction LLM and its prompt style (``llm``), whatever the extraction method. The
    no-LLM options (``summaries: extractive``, ``gate_judge: similarity``) name no LLM in
    their step's config, and the LLM path's config is what it was before they existed,
    so landed specs keep their fingerprints.
    """
    extract = plan.add(f"extract.{name}", "extract", {**extraction, "beta": 1.0},
                       {"chunks": "chunks"})
    hierarchy = plan.add(
        f"hierarchy.{name}", "hierarchy",
        {k: cfg[k] for k in ("fuzzy", "cosine", "max_cluster_size", "max_levels", "seed")}
        | {"embedder": embedder}, {"extract": extract.name})
    writer = {"method": "extractive"} if cfg["summaries"] == "extractive" else llm
    summaries = plan.add(f"summaries.{name}", "summarise",
                         {"summary_entities": cfg["summary_entities"], "embedder": embedder,
                          **writer}, {"hierarchy": hierarchy.name})
    judge = ({"judge": "similarity", "threshold": cfg["gate_judge_similarity"]}
             if cfg["gate_judge"] == "similarity" else llm)
    plan.add(f"gates.{name}", "gates",
             {"top_m": cfg["gate_top_m"], "min_similarity": cfg["gate_min_similarity"], **judge},
             {"hierarchy": hierarchy.name, "summaries": summaries.name})


def _resolve_fusion(strategy: dict[str, Any], entries: dict[str, dict[str, Any]],
                    graphs: dict[str, list[tuple[dict[str, Any], str]]]) -> dict[str, Any]:
    """A fusion strategy with its members' concrete configs in place of their names, at
    the fusion's budget (a member's candidate depth follows the budget), so its
    fingerprint covers everything its ranking depends on."""
    if strategy["strategy"] != "fusion":
        return strategy
    members = []
    for name in strategy["fuse"]:
        expanded = _expand_strategy({**entries[name], "budget_tokens": strategy["budget_tokens"]},
                                    graphs)
        if len(expanded) != 1:
            raise KgragError(f"strategy {strategy['name']!r}: fused entry {name!r} sweeps a "
                             "parameter other than the budget; fuse an entry that stands for "
                             "one strategy")
        members.append(expanded[0][1])
    return {**strategy, "fuse": members}


def _expand_strategy(query: dict[str, Any],
                     graphs: dict[str, list[tuple[dict[str, Any], str]]]
                     ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every concrete strategy a (possibly swept) spec entry stands for."""
    refs = [key for key in ("skeleton", "bipartite", "hierarchy", "entities") if query.get(key)]
    out = []
    for picked in itertools.product(*(graphs[query[key]] for key in refs)):
        for chosen, cfg in variants(query, SWEEPABLE_QUERY):
            swept = {k: v for graph_chosen, _ in picked for k, v in graph_chosen.items()}
            swept.update(chosen)
            cfg = {**cfg, **{key: graph_name for key, (_, graph_name) in zip(refs, picked)}}
            cfg["name"] = label(query["name"], swept)
            out.append((swept, cfg))
    return out
