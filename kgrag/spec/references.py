"""Cross-references between a spec's graph builds and query strategies, checked against
the declarations (``kgrag.declarations``).

The schema lists every parameter any graph kind, strategy or extraction method takes;
which of them apply to which kind or method, and which graph a strategy must name, is
checked here, so that a parameter that would silently do nothing (``tau`` on a skeleton,
``theta`` on ``naive``, ``max_entities`` with method ``nlp``) is an error rather than a
no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kgrag.declarations import (
    NO_DEFAULT,
    STRATEGY_COMMON,
    Config,
    GraphRef,
    Param,
    Problem,
    Strategy,
    TrainedRef,
    param_names,
)
from kgrag.errors import KgragError
from kgrag.sweeps import sweep_keys, variants

COMMON_GRAPH = {"name", "kind"}
COMMON_STRATEGY = {"name", "strategy"} | param_names(STRATEGY_COMMON)


def declared() -> tuple[dict[str, Strategy], dict[str, Any], dict[str, Any]]:
    """The registries: strategies, graph kinds and extraction methods. Imported here, when
    a spec is checked, because they live beside their code."""
    from kgrag.graphs.extraction.methods import EXTRACTION_METHODS
    from kgrag.pipeline.graph_kinds import GRAPH_KINDS
    from kgrag.retrieval import STRATEGIES

    return STRATEGIES, GRAPH_KINDS, EXTRACTION_METHODS


def reference_problems(raw: Config, filled: Config) -> Iterator[Problem]:
    """(key path, message) for every misplaced parameter or dangling graph reference.

    ``raw`` is what the user wrote (to see which parameters were set explicitly);
    ``filled`` has the defaults.
    """
    from kgrag.graphs.extraction.methods import EXTRACTION_COMMON

    strategies, graph_kinds, methods = declared()
    method = filled["extraction"]["method"]
    yield from _misplaced(("extraction",), raw.get("extraction", {}),
                          param_names(methods[method].params + EXTRACTION_COMMON) | {"method"},
                          f"extraction method {method}")
    kinds: dict[str, str] = {}
    for i, graph in enumerate(raw.get("graphs", [])):
        if graph["name"] in kinds:
            yield ("graphs", i, "name"), f"duplicate graph name '{graph['name']}'"
        kinds[graph["name"]] = graph["kind"]
        kind = graph_kinds[graph["kind"]]
        yield from _misplaced(("graphs", i), graph, param_names(kind.params) | COMMON_GRAPH,
                              f"a {graph['kind']} graph")
        yield from kind.problems(i, graph)
    yield from _training_problems(raw, filled)
    yield from _answer_problems(filled, strategies)
    for i, (q_raw, q) in enumerate(zip(raw.get("query", []), filled["query"])):
        strategy = strategies[q["strategy"]]
        q = with_defaults(q, strategy.params_of(q))
        yield from _misplaced_in_strategy(i, q_raw, q, strategy)
        own = list(strategy.problems(i, q_raw, q, filled))
        own += _member_problems(i, q_raw, strategy, filled)
        yield from own
        if not own:  # an entry with its own problems may not say what it needs
            yield from _graph_problems(i, q, strategy, kinds)
            yield from _trained_problems(i, q, strategy, filled)


def _member_problems(i: int, raw: Config, strategy: Strategy, filled: Config
                     ) -> list[Problem]:
    """Each entry a strategy built on others names must be another entry of the query list
    that ranks chunks (``kgrag.retrieval.RANKERS``)."""
    from kgrag.retrieval import RANKERS

    entries = {q["name"]: q["strategy"] for q in filled["query"]}
    problems: list[Problem] = []
    for role, name in strategy.members(raw).items():
        path = ("query", i, *strategy.member_path(role))
        if name not in entries or name == raw.get("name"):
            problems.append((path, (f"no other query entry named '{name}' (known: "
                                    f"{', '.join(entries)})")))
        elif entries[name] not in RANKERS:
            problems.append((path, (f"'{name}' is a {entries[name]} entry; strategy "
                                    f"{strategy.name} takes the ranking of an entry of "
                                    f"{', '.join(RANKERS)}")))
    return problems


def _answer_problems(filled: Config, strategies: dict[str, Strategy]) -> Iterator[Problem]:
    """What ``answer.cite``, ``answer.mode: extractive`` and ``answer.context: gold`` need:
    a short answer for a span, and strategies whose answers are read from a context of
    chunks (a strategy that answers while it retrieves, or one over a knowledge graph's
    triples, has no part to cite nor chunk to answer from)."""
    answer = filled.get("answer", {})
    if answer.get("questions") == 0:
        return
    asked = [key for key, on in (("cite", answer.get("cite")),
                                 ("mode", answer.get("mode", "free") != "free"),
                                 ("context", answer.get("context", "retrieved") != "retrieved"))
             if on]
    if answer.get("mode") == "extractive" and answer["length"] != "short":
        yield (("answer", "mode"), ("an extractive answer is a span of the context: it needs "
                                    f"answer.length short, not {answer['length']}"))
    if not asked:
        return
    corpus = filled["corpus"]
    if (answer.get("context") == "gold" and corpus["dataset"] in ("jsonl", "text", "documents")
            and "questions_file" not in corpus):
        yield (("answer", "context"), ("gold answers from each question's supporting "
                                       f"documents, and a {corpus['dataset']} corpus without "
                                       "a questions file has no supporting labels; answer "
                                       "from the retrieved context instead"))
    for i, q in enumerate(filled["query"]):
        strategy = strategies[q["strategy"]]
        q = with_defaults(q, strategy.params_of(q))
        if strategy.evidence != "chunks" or strategy.answers_in_trace(q):
            why = ("answers while it retrieves" if strategy.evidence == "chunks"
                   else f"retrieves {strategy.evidence}, not chunks")
            yield (("query", i, "strategy"),
                   (f"answer.{asked[0]}: strategy {q['strategy']} ({q['name']!r}) {why}, so "
                    "its answers cannot cite parts of a context or come from one; answer it "
                    "without answer.cite, mode and context, or in a spec of its own"))


def _training_problems(raw: Config, filled: Config) -> Iterator[Problem]:
    """Duplicate training names, and each method's own checks."""
    from kgrag.training import TRAINING_METHODS

    names: set[str] = set()
    for i, (t_raw, entry) in enumerate(zip(raw.get("training", []),
                                           filled.get("training", []))):
        if entry["name"] in names:
            yield ("training", i, "name"), f"duplicate training name '{entry['name']}'"
        names.add(entry["name"])
        yield from TRAINING_METHODS[entry["method"]].problems(i, t_raw, entry, filled)


def prune_defaults(filled: Config) -> Config:
    """Drop the defaults the schema filled in for parameters that do not apply to an
    item's kind, strategy or training method, and the ``off`` values, so configs (and
    fingerprints) carry only what an item uses; fill the defaults that differ by strategy
    (θ) or method (a seed). A parameter whose default changed after specs landed keeps
    its old behaviour as its ``off`` value: a landed spec that writes it out keeps its
    fingerprints, and one that leaves it out gets the new default."""
    from kgrag.training import TRAINING_METHODS

    strategies, graph_kinds, _ = declared()
    graphs = [{k: v for k, v in g.items()
               if k in param_names(graph_kinds[g["kind"]].params) | COMMON_GRAPH}
              for g in filled["graphs"]]
    query = []
    for q in filled["query"]:
        params = STRATEGY_COMMON + strategies[q["strategy"]].params_of(q)
        off = {p.name: p.off for p in params if p.off is not NO_DEFAULT}
        entry = {k: v for k, v in q.items()
                 if k in param_names(params) | COMMON_STRATEGY
                 and not (k in off and v == off[k])}
        # a parameter set to its off value stays off, whatever its default for new specs
        dropped = {k for k, v in q.items() if k in off and v == off[k]}
        query.append(with_defaults(entry, tuple(p for p in params if p.name not in dropped)))
    training = []
    for t in filled.get("training", []):
        params = TRAINING_METHODS[t["method"]].params
        training.append(with_defaults({k: v for k, v in t.items()
                                       if k in param_names(params) | {"name", "method"}},
                                      params))
    return {**filled, "graphs": graphs, "query": query,
            **({"training": training} if "training" in filled else {})}


def with_defaults(entry: Config, params: tuple[Param, ...]) -> Config:
    """``entry`` with the declared default of every parameter it leaves out (the schema
    fills the defaults all strategies share; θ's differs by strategy)."""
    return {**{p.name: p.default for p in params if p.default is not NO_DEFAULT}, **entry}


def _misplaced_in_strategy(i: int, raw: Config, entry: Config, strategy: Strategy
                           ) -> Iterator[Problem]:
    allowed = param_names(strategy.params_of(entry)) | COMMON_STRATEGY
    for key in raw:
        if key in allowed:
            continue
        switches = [f"{g.switch}: {g.value}" for g in strategy.groups
                    if key in param_names(g.params)]
        unless = f" unless {' or '.join(switches)}" if switches else ""
        yield ("query", i, key), f"'{key}' is not a parameter of strategy {strategy.name}{unless}"


def _graph_problems(i: int, entry: Config, strategy: Strategy, kinds: dict[str, str]
                    ) -> Iterator[Problem]:
    """Every graph the entry needs, in every variant of its sweep, must be named and be a
    build of that kind."""
    refs: dict[str, GraphRef] = {}
    for need in _needs(entry, strategy):
        if isinstance(need, GraphRef):
            refs.setdefault(need.kind, need)
    for key, need in refs.items():
        name = entry.get(key)
        if name is None:
            yield ("query", i), (f"strategy {strategy.name} needs '{key}' ({need.why}): the "
                                 f"name of a {key} graph")
        elif kinds.get(name) != key:
            known = [g for g, k in kinds.items() if k == key]
            yield ("query", i, key), (f"no {key} graph named '{name}' in graphs "
                                      f"(known: {', '.join(known) or 'none'})")


def _needs(entry: Config, strategy: Strategy) -> list[Any]:
    """What the entry reads itself, in every variant of its sweep (its members are other
    entries, checked on their own)."""
    try:
        return [need for _, variant in variants(entry, sweep_keys(STRATEGY_COMMON
                                                                  + strategy.params_of(entry)))
                for need in strategy.needs(variant).values()]
    except KgragError:
        return []


def _trained_problems(i: int, entry: Config, strategy: Strategy, filled: Config
                      ) -> Iterator[Problem]:
    """Every model the entry needs must be named and be trained by a training entry of a
    method that trains that kind of model."""
    from kgrag.training import TRAINING_METHODS

    trains = {t["name"]: TRAINING_METHODS[t["method"]].trains
              for t in filled.get("training", [])}
    refs = {need.key: need for need in _needs(entry, strategy) if isinstance(need, TrainedRef)}
    for need in refs.values():
        name = entry.get(need.key)
        if name is None:
            yield ("query", i), (f"strategy {strategy.name} needs '{need.key}' ({need.why}): "
                                 "the name of a training entry")
        elif trains.get(name) != need.model:
            known = [t for t, kind in trains.items() if kind == need.model]
            yield ("query", i, need.key), (
                f"no training entry named '{name}' that trains a {need.model} "
                f"(known: {', '.join(known) or 'none'})")


def _misplaced(path: tuple[Any, ...], item: Config, allowed: set[str], what: str
               ) -> Iterator[Problem]:
    for key in item:
        if key not in allowed:
            yield (*path, key), f"'{key}' is not a parameter of {what}"
