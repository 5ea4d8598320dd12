"""Compile a spec into a plan: graph builds, strategies and sweeps become steps.

Graph kinds and strategies compile through their declarations
(``kgrag.pipeline.graph_kinds``, ``kgrag.retrieval``). A parameter declared ``sweep`` and
given as a list (a graph's β, K, τ; a strategy's θ or budget) is a sweep: every
combination becomes its own graph variant or strategy row, named ``<name>@key=value,…``,
and each reuses every upstream step it shares with the others, because shared steps get
identical fingerprints.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.answer.reader import focus_of
from kgrag.configuration import Spec, thaw
from kgrag.contents.training import model_dir
from kgrag.corpus.convert import CONVERTER_VERSION
from kgrag.corpus.folder import corpus_files
from kgrag.corpus.importers import IMPORTERS
from kgrag.corpus.sources import SOURCES_VERSION
from kgrag.declarations import STRATEGY_COMMON, resolve, step_name
from kgrag.errors import KgragError
from kgrag.eval.registry import lookup
from kgrag.graphs.extraction.methods import method_of
from kgrag.models import Models
from kgrag.models.registry import file_sha256, folder_sha256
from kgrag.pipeline.artefacts import artefact_dir
from kgrag.pipeline.graph_kinds import GRAPH_KINDS, BuildEnv
from kgrag.pipeline.plan import Plan
from kgrag.retrieval import STRATEGIES, inputs, members, needs
from kgrag.retrieval.naive import dense_index
from kgrag.retrieval.walk_params import walks
from kgrag.steps import KINDS
from kgrag.store.vectors import ann_settings
from kgrag.sweeps import label, sweep_keys, variants
from kgrag.training import TRAINING_METHODS
from kgrag.training.split import split_of

KG_HOPS = 2  # a KGQA question's retrieval graph: this many hops around its topic entities
DENSE = "dense"  # the dense index of chunks; ``dense.<embedder>`` for a strategy's own


def has_questions(spec: Spec) -> bool:
    """Whether the run evaluates: benchmark datasets carry questions, and a jsonl or text
    corpus has them when it names a ``questions_file``."""
    return IMPORTERS[spec.corpus["dataset"]].questions or "questions_file" in spec.corpus


def reads_chunks(spec: Spec) -> bool:
    """Whether anything in the spec reads the chunks, so the plan chunks the corpus: every
    graph build does, so does a strategy whose evidence is chunks (every text strategy)
    and a metric that compares chunk spans with gold sentences. A strategy over a
    knowledge graph's triples needs none of them."""
    return (bool(spec.graphs)
            or any(TRAINING_METHODS[t["method"]].evidence == "chunks" for t in spec.training)
            or any(STRATEGIES[q["strategy"]].evidence == "chunks" for q in spec.query)
            or any(lookup(name)[0].reads == "spans" for name in spec.evaluate["metrics"]))


def reads_triples(spec: Spec) -> bool:
    """Whether a strategy or a training entry reads a knowledge graph's triples, so the
    plan embeds the graph and every question's retrieval graph (step ``kg``)."""
    return (any(STRATEGIES[q["strategy"]].evidence == "triples" for q in spec.query)
            or any(TRAINING_METHODS[t["method"]].evidence == "triples" for t in spec.training))


def source_sha256(path: Path, what: str = "corpus path", follow_links: bool = False) -> str:
    """The content hash of a corpus source, a file or a folder (what fingerprints and
    bundles identify it by): a folder's files as its importer reads them
    (``kgrag.corpus.folder``); ``what`` names it in messages."""
    try:
        if path.is_file():
            return file_sha256(path)
        if path.is_dir():
            return folder_sha256(path, corpus_files(path, follow_links).files)
    except OSError as exc:  # a name too long, a folder we may not read
        raise KgragError(f"{what} cannot be read: {exc.strerror}: {path}") from None
    if path.exists():  # reading a FIFO would wait for a writer
        raise KgragError(f"{what} is neither a file nor a folder (a FIFO, socket or "
                         f"device?): {path}")
    raise KgragError(f"{what} does not exist: {path}")


def compile_plan(spec: Spec, models: Models) -> Plan:
    """The steps a spec asks for, each fingerprinted from what changes its output."""
    plan = Plan(KINDS)
    corpus = {k: v for k, v in thaw(spec.corpus).items() if k not in ("path", "questions_file")}
    corpus["source_sha256"] = source_sha256(spec.resolve(spec.corpus["path"]),
                                            follow_links=spec.corpus.get("follow_links", False))
    if "questions_file" in spec.corpus:  # by content, like the documents; absent otherwise
        corpus["questions_sha256"] = source_sha256(spec.resolve(spec.corpus["questions_file"]),
                                                   "corpus.questions_file")
    # A folder of files converted to text: how they are read and cited joins the
    # fingerprints; absent for every other corpus, whose plans keep theirs.
    converts = IMPORTERS[spec.corpus["dataset"]].converts
    plan.add("corpus", "import", {**corpus, **({"converter": CONVERTER_VERSION} if converts
                                               else {})})
    chunked = reads_chunks(spec)
    if chunked:  # a trained embedder keeps its base's tokenizer, so chunks precede training
        plan.add("chunks", "chunk",
                 {**thaw(spec.chunking), "tokenizer": models.tokenizer_model().sha256,
                  **({"sources": SOURCES_VERSION} if converts else {})},
                 {"corpus": "corpus"})
    llm = {"sha256": models.model("answerer").sha256,
           **{k: spec.models["llm"][k] for k in ("temperature", "top_p", "seed")}}
    env = _build_env(spec, models, llm)
    if reads_triples(spec):
        padded = {"graph_triples": spec.corpus["graph_triples"]} if spec.corpus.get(
            "graph_triples") else {}  # absent: the landed plans' fingerprints
        plan.add("kg", "kg_index", {"embedder": models.identity(models.model("embedder")),
                                    "hops": spec.corpus.get("hops", KG_HOPS), **padded},
                 {"corpus": "corpus"})
    trainings, held_out, trained = _add_training(plan, spec, models, env, llm)
    embedder = models.identity(models.model("embedder"))
    graph_variants, builds = _add_graphs(plan, spec, dataclasses.replace(env, embedder=embedder))
    plan.builds = builds
    strategies = [s for q in spec.query for s in _expand_strategy(thaw(q), graph_variants)]
    entries = {q["name"]: thaw(q) for q in spec.query}
    strategies = [(chosen, _resolve_members(s, entries, graph_variants, env))
                  for chosen, s in strategies]
    owns = {m["embedder"] for _, s in strategies for m in [s, *members(s).values()]
            if m.get("embedder")}  # strategies' own embedders, their members' too
    embedder_of = {DENSE: None} | {dense_index({"embedder": own})[DENSE]: own for own in owns}
    for index in sorted({need for _, s in strategies
                         for need in needs(s).values()
                         if isinstance(need, str) and need.startswith(DENSE)}):
        own = embedder_of[index]
        config: dict[str, Any] = (
            {"embedder": embedder} if own is None else
            {"embedder": models.identity(models.embedder_model(own)), "model": own})
        if "ann" in spec.dense_index:  # absent: a flat scan, the landed fingerprints
            config["ann"] = ann_settings(thaw(spec.dense_index["ann"]))
        plan.add(index, "dense_index", config, {"chunks": "chunks"})
    for _, strategy in strategies:
        declared = STRATEGIES[strategy["strategy"]]
        own = strategy.get("embedder")
        config = {"strategy": strategy,
                  "embedder": embedder if own is None else models.identity(models.embedder_model(own))}
        if held_out:  # a trained retriever's training questions are never evaluated
            config["held_out"] = held_out
        if "ann" in spec.dense_index and any(walks(m) for m in [strategy,
                                                                *members(strategy).values()]):
            # a walk reads the index's nearest chunks, not every chunk's similarity
            # (kgrag.retrieval.dense_scores); absent: the landed fingerprints
            config["dense_scores"] = "nearest"
        if declared.uses_llm(strategy):
            config |= {"llm": llm, "prompt": spec.answer["prompt"],
                       "max_retries": spec.models["llm"]["max_retries"]}
        if any(m.get("question_mentions") for m in [strategy, *members(strategy).values()]):
            # questions parsed like the chunks: the pipeline joins the fingerprint
            assert models.pipeline is not None, "the spec check requires a method that parses"
            config["pipeline"] = models.pipeline.identity()
        chunks = {"chunks": "chunks"} if declared.evidence == "chunks" else {}
        plan.queries[strategy["name"]] = plan.step(
            step_name("retrieve", strategy["name"]), "retrieve", config,
            {"corpus": "corpus", **chunks, **inputs(strategy, trained)})
    if not has_questions(spec):
        return plan
    answering = spec.answer["questions"] != 0
    evaluate_inputs = {"corpus": "corpus", **({"chunks": "chunks"} if chunked else {})}
    for build in [*builds, *trainings]:  # each build's cost is reported beside the strategies
        evaluate_inputs |= {f"build.{step}": step for step in build["steps"]}
    for _, strategy in strategies:
        name = strategy["name"]
        retrieve = plan.append(plan.queries[name])
        evaluate_inputs[retrieve.name] = retrieve.name
        for role, need in STRATEGIES[strategy["strategy"]].evaluated(strategy).items():
            evaluate_inputs[f"{role}.{name}"] = resolve(need, strategy)  # structural metrics
        if answering:
            settings = {**thaw(spec.answer), "llm": llm}
            if settings.get("mode") == "extractive" and focus_of(settings):
                settings["embedder"] = embedder  # it picks the evidence sentences
            if "questions" in strategy:  # it retrieved for its first N: answer at most those
                settings["questions"] = min(strategy["questions"],
                                            settings["questions"] or strategy["questions"])
            kind = ("answer_from_trace" if STRATEGIES[strategy["strategy"]].answers_in_trace(
                strategy) else "answer")
            # numbered parts, spans, the supporting documents' chunks
            cites = ({"chunks": "chunks"} if settings.get("cite") or settings.get("context")
                     or settings.get("mode", "free") != "free" else {})
            step = plan.add(step_name("answer", name), kind, settings,
                            {"corpus": "corpus", "retrieve": retrieve.name, **cites})
            evaluate_inputs[step.name] = step.name
    plan.add("evaluate", "evaluate",
             {"metrics": list(spec.evaluate["metrics"]), "dataset": spec.corpus["dataset"],
              "strategies": [s for _, s in strategies], "builds": builds,
              "params": {s["name"]: chosen for chosen, s in strategies},
              **({"training": trainings} if trainings else {})}, evaluate_inputs)
    return plan


def _build_env(spec: Spec, models: Models, llm: dict[str, Any]) -> BuildEnv:
    """What graph builds and training entries share: the extraction's config and the
    knowledge-building LLM work. The embedder's identity is filled in once training
    entries are bound (a trained embedder's identity is its final step's fingerprint)."""
    llm_work = {"llm": {**llm, "sha256": models.model("extractor").sha256,
                        "max_retries": spec.models["llm"]["max_retries"]},
                "prompt": spec.extraction["prompt"]}
    settings = thaw(spec.extraction)
    return BuildEnv(embedder="",
                    extraction=method_of(settings).config(settings, models, llm_work),
                    llm_work=llm_work, titled=spec.chunking["title"])


@dataclass(frozen=True)
class TrainEnv:
    """What a training method's ``build`` needs besides its entry: the identity of an
    embedder by name, the scoring LLM, the builds' extraction and LLM work, and how the
    answering LLM is prompted."""

    base_embedder: Callable[[str], str]
    scorer: dict[str, Any]
    extraction: dict[str, Any]
    llm_work: dict[str, Any]
    prompt: str = "completion"  # how the answering LLM is prompted (answer.prompt)


def _add_training(plan: Plan, spec: Spec, models: Models, build: BuildEnv,
                  llm: dict[str, Any]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """Every training entry's steps, with each stage's embedder bound in ``models``.
    Returns, per entry, ``{"name", "method", "steps"}`` (its cost is reported); the
    entries' distinct splits, whose training questions every retrieve step skips; and
    entry name → the step holding its model (what a strategy's ``TrainedRef`` reads)."""
    if spec.training and not has_questions(spec):
        raise KgragError(f"{spec.path.name}: training needs questions with answers, and "
                         f"this {spec.corpus['dataset']} corpus has none (give it a "
                         "questions_file)")
    env = TrainEnv(lambda name: models.identity(models.embedder_model(name)),
                   {**llm, "max_retries": spec.models["llm"]["max_retries"]},
                   build.extraction, build.llm_work, spec.answer["prompt"])
    splits, trainings, trained = [], [], {}
    for entry in map(thaw, spec.training):
        method = TRAINING_METHODS[entry["method"]]
        last = method.build(plan, entry["name"], entry, env)
        steps = [s for s in plan.upstream([last]) if s.name not in ("corpus", "chunks")]
        if method.trains == "embedder":
            models.bind(entry["name"], [
                (model_dir(artefact_dir(spec.output_dir, step.name, step.fingerprint)),
                 step.fingerprint) for step in steps if step.kind == method.model_kind])
        splits.append(split_of(entry))
        trainings.append({"name": entry["name"], "method": entry["method"],
                          "steps": [step.name for step in steps]})
        trained[entry["name"]] = last
    return trainings, [dict(s) for s in {json.dumps(s, sort_keys=True): s
                                         for s in splits}.values()], trained


def _add_graphs(plan: Plan, spec: Spec, env: BuildEnv
                ) -> tuple[dict[str, list[tuple[dict[str, Any], str]]], list[dict[str, Any]]]:
    """Steps for every graph build variant, as its kind declares them. Returns graph name →
    [(swept values, label)] and, per variant, ``{"graph": label, "kind": kind, "steps":
    [its step names]}``."""
    built: dict[str, list[tuple[dict[str, Any], str]]] = {}
    builds: list[dict[str, Any]] = []
    for graph in map(thaw, spec.graphs):
        kind = GRAPH_KINDS[graph["kind"]]
        for chosen, cfg in variants(graph, sweep_keys(kind.params)):
            name = label(graph["name"], chosen)
            before = len(plan.steps)
            kind.build(plan, name, cfg, env)
            built.setdefault(graph["name"], []).append((chosen, name))
            builds.append({"graph": name, "kind": cfg["kind"],
                           "steps": [step.name for step in plan.steps[before:]]})
    return built, builds


def _resolve_members(strategy: dict[str, Any], entries: dict[str, dict[str, Any]],
                     graphs: dict[str, list[tuple[dict[str, Any], str]]], env: BuildEnv
                     ) -> dict[str, Any]:
    """A strategy built on other entries (``Strategy.members``), with their concrete
    configs in place of their names, so its fingerprint covers everything their
    rankings depend on; each member first takes the settings the strategy gives it
    (``member_settings``), and the strategy then adds what it takes from its members and
    the extraction (``with_members``)."""
    declared = STRATEGIES[strategy["strategy"]]
    named = declared.members(strategy)
    if not named:
        return strategy
    settings = declared.member_settings(strategy)
    concrete = {role: _one(strategy, name, {**entries[name], **settings}, graphs)
                for role, name in named.items()}
    return declared.with_members(declared.replace_members(strategy, concrete), env.extraction)


def _one(strategy: dict[str, Any], name: str, entry: dict[str, Any],
         graphs: dict[str, list[tuple[dict[str, Any], str]]]) -> dict[str, Any]:
    """The one concrete strategy a named entry stands for."""
    expanded = _expand_strategy(entry, graphs)
    if len(expanded) != 1:
        raise KgragError(f"strategy {strategy['name']!r}: entry {name!r} sweeps a parameter; "
                         "name an entry that stands for one strategy")
    return expanded[0][1]


def _expand_strategy(query: dict[str, Any],
                     graphs: dict[str, list[tuple[dict[str, Any], str]]]
                     ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every concrete strategy a (possibly swept) spec entry stands for."""
    refs = [key for key in GRAPH_KINDS if query.get(key)]
    params = STRATEGY_COMMON + STRATEGIES[query["strategy"]].params_of(query)
    out = []
    for picked in itertools.product(*(graphs[query[key]] for key in refs)):
        for chosen, cfg in variants(query, sweep_keys(params)):
            swept = {k: v for graph_chosen, _ in picked for k, v in graph_chosen.items()}
            swept.update(chosen)
            cfg = {**cfg, **{key: graph_name for key, (_, graph_name) in zip(refs, picked)}}
            cfg["name"] = label(query["name"], swept)
            out.append((swept, cfg))
    return out
