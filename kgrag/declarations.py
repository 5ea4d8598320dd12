"""Declarations: what a query strategy, a graph kind, an extraction method or a training
method takes and does.

Each is declared once, beside its code, as one of the records below: its parameters
(JSON-Schema fragment, default, description), the artefacts it reads, its own checks and
its behaviour. Everything else is derived from these records: the spec schema's
``strategy``, ``graph``, ``extraction`` and ``training`` definitions
(``kgrag.spec.generate``), the check that a parameter applies to what it is set on and
that a strategy names the graphs it needs (``kgrag.spec.references``), and the plan's
steps (``kgrag.pipeline.compile``). The records sit below every layer, so the library
modules that declare methods import nothing above them.

Why plain records and the JSON Schema rather than pydantic models: the one validator
stays jsonschema, whose errors carry key paths that ``kgrag.spec.load`` maps to YAML
lines and reports all at once, and configs stay the plain dicts every fingerprint is
computed from. The schema is generated from these records and a test checks that the
published file is current, so editors keep ``schemas/pipeline.schema.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kgrag.errors import KgragError
from kgrag.limits import COUNT_MAX

Config = dict[str, Any]
Problem = tuple[tuple[Any, ...], str]  # (key path, message)
NO_DEFAULT = object()  # a parameter whose absence is meaningful (e.g. ``questions``)

@dataclass(frozen=True)
class Param:
    """One parameter.

    ``schema`` is the JSON-Schema fragment of one value; ``sweep`` also accepts a list of
    such values, every one of which is run (a sweep). ``off`` marks a parameter added
    after specs landed: that value is dropped from configs, so the fingerprints of specs
    that do not use the parameter stay as they were.
    """

    name: str
    schema: Mapping[str, Any]
    description: str
    default: Any = NO_DEFAULT
    sweep: bool = False
    off: Any = NO_DEFAULT


@dataclass(frozen=True)
class GraphRef:
    """An artefact of the graph build that a strategy's ``kind`` key names: the step
    ``artefact`` of that build (``skeleton``, ``core``, ``extract``, ``gates``…). ``why``
    says, in an error, why the strategy needs the graph."""

    kind: str
    artefact: str
    why: str


@dataclass(frozen=True)
class TrainedRef:
    """A model that a training entry trains, named by a strategy's ``key`` parameter: the
    artefact folder of that entry's final step, of a method that trains a ``model`` of
    this kind (``TrainingMethod.trains``: "embedder", "triple_scorer"…). ``why`` says, in
    an error, why the strategy needs it."""

    key: str
    model: str
    why: str


Need = str | GraphRef | TrainedRef  # a plan-level artefact ("chunks", "dense"), a graph
# build's, or a training entry's model


class Retrieves(Protocol):
    """What a strategy's ``runs`` is: a class whose ``load`` builds its retriever from a
    compiled entry, the entry's artefact folders by role and ``kgrag.retrieval.Resources``
    (``Any`` here: this base layer does not import the retrieval package)."""

    def load(self, config: Config, artefacts: dict[str, Path], resources: Any, /) -> Any: ...


class PlannedStep(Protocol):
    """A step a declaration added to the plan: its name (what later steps' inputs name)
    and its fingerprint."""

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...


class Steps(Protocol):
    """What a graph kind's or a training method's ``build`` adds its steps to: the plan
    (``kgrag.pipeline.plan.Plan``), through these two methods only."""

    def add(self, name: str, kind: str, config: Config,
            inputs: dict[str, str] | None = None) -> PlannedStep:
        """Fingerprint a step and append it."""

    def shared(self, name: str, kind: str, config: Config,
               inputs: dict[str, str] | None = None) -> PlannedStep:
        """The plan's step this one repeats (same fingerprint), or this one appended."""


def step_name(artefact: str, build: str) -> str:
    """The step that writes ``artefact`` for ``build``: a graph build variant's label, or a
    strategy row's name for its ``retrieve`` and ``answer`` steps."""
    return f"{artefact}.{build}"


def resolve(need: Need, config: Config, trained: Mapping[str, str] | None = None) -> str:
    """The step a strategy's need names: a plan-level artefact as it is, a graph artefact in
    the build its config names, a model in the final step of the training entry it names
    (``trained``: entry name → that step), or a clear error: specs are checked earlier,
    this guards API users."""
    if isinstance(need, str):
        return need
    if isinstance(need, TrainedRef):
        entry = config.get(need.key)
        if trained is None or not isinstance(entry, str) or entry not in trained:
            raise KgragError(f"strategy {config['name']!r}: {need.why}, so '{need.key}' must "
                             f"name a training entry that trains a {need.model}")
        return trained[entry]
    build = config.get(need.kind)
    if build is None:
        raise KgragError(f"strategy {config['name']!r}: {need.why}, so '{need.kind}' must "
                         f"name a {need.kind} graph build")
    return step_name(need.artefact, build)


@dataclass(frozen=True)
class Group:
    """Parameters that apply only while ``switch`` is ``value`` (a ppr channel's walk)."""

    switch: str
    value: Any
    params: tuple[Param, ...]


def _no_problems(index: int, raw: Config, filled: Config, spec: Config) -> Iterator[Problem]:
    return iter(())


def _never(config: Config) -> bool:
    return False


def _one_call(config: Config) -> int:
    return 1


def _reads_no_graph(config: Config) -> dict[str, GraphRef]:
    return {}


def _no_settings(config: Config) -> Config:
    return {}


def _as_it_is(config: Config, extraction: Config) -> Config:
    return config


def _no_graph_problems(index: int, graph: Config) -> Iterator[Problem]:
    return iter(())


@dataclass(frozen=True)
class Strategy:
    """A query strategy.

    ``runs`` is the class that retrieves (``load(config, artefacts, resources)``,
    ``retrieve(question, vector)``, and ``ranking`` when it ranks chunks, which lets
    another strategy use it as a member). ``needs(config)`` maps each input role to the
    artefact it reads.
    ``problems(index, raw entry, filled entry, filled spec)`` yields the strategy's own
    spec checks; ``uses_llm(config)`` says whether it calls the LLM while retrieving;
    ``evaluated(config)`` names graph artefacts its structural metrics read.
    ``calls_per_question(config)`` bounds its LLM requests per question (before retries),
    for a dry run; ``answers_in_trace(config)`` says that it answers while retrieving (a
    model only the retrieval holds, RAS's Graph-LLM) and its trace's ``answer`` is the
    answer. ``evidence`` is what it retrieves: "chunks" (text units, read from the plan's chunks
    and handed to ``load`` as ``resources.chunks``) or another kind, such as triples of a
    knowledge-graph corpus, for which the plan chunks nothing (``Evidence``).

    A strategy built on other entries of the spec names them in its parameter
    ``member_key`` (``members``); ``member_settings(config)`` are settings each member
    takes from the entry before it is resolved (fusion's budget), and
    ``with_members(config, extraction)`` is the entry once its members are concrete
    configs, given the spec's ``extract`` config (ras copies its retriever's embedder and
    turns passages into triples with that extraction). ``kgrag.retrieval`` does the rest.
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    runs: Retrieves
    needs: Callable[[Config], Mapping[str, Need]]
    groups: tuple[Group, ...] = ()
    problems: Callable[[int, Config, Config, Config], Iterator[Problem]] = _no_problems
    uses_llm: Callable[[Config], bool] = _never
    evaluated: Callable[[Config], dict[str, GraphRef]] = _reads_no_graph
    evidence: str = "chunks"
    calls_per_question: Callable[[Config], int] = _one_call
    answers_in_trace: Callable[[Config], bool] = _never
    member_key: str | None = None
    member_settings: Callable[[Config], Config] = _no_settings
    with_members: Callable[[Config, Config], Config] = _as_it_is

    def members(self, config: Config) -> dict[str, Any]:
        """Role → what the entry's ``member_key`` holds for that member: an entry's name
        in a spec, its concrete config once compiled. A list's members play the roles
        "0", "1"…; a single name plays the role named like the key."""
        key = self.member_key
        value = config.get(key) if key else None
        if key is None or value is None:
            return {}
        if isinstance(value, list):
            return {str(i): member for i, member in enumerate(value)}
        return {key: value}

    def replace_members(self, config: Config, by_role: dict[str, Any]) -> Config:
        """The entry with each member (by role, as ``members`` names them) in its place."""
        key = self.member_key
        assert key is not None, "only a strategy with a member_key has members"
        value = config[key]
        return {**config, key: [by_role[str(i)] for i in range(len(value))]
                if isinstance(value, list) else by_role[key]}

    def member_path(self, role: str) -> tuple[Any, ...]:
        """Where a member's name stands in the entry: ``(key, index)`` or ``(key,)``."""
        return (self.member_key, int(role)) if role.isdigit() else (self.member_key,)

    def inputs(self, config: Config, trained: Mapping[str, str] | None = None
               ) -> dict[str, str]:
        """The step each of its own input roles reads, for a concrete config
        (``trained``: training entry name → the step holding its model); a member's are
        added by ``kgrag.retrieval.inputs``."""
        return {role: resolve(need, config, trained) for role, need in self.needs(config).items()}

    def params_of(self, config: Config) -> tuple[Param, ...]:
        """The parameters an entry takes: the strategy's, and each group's that is on."""
        extra = tuple(p for g in self.groups if config.get(g.switch) == g.value
                      for p in g.params)
        return self.params + extra

    def all_params(self) -> tuple[Param, ...]:
        return self.params + tuple(p for g in self.groups for p in g.params)


@dataclass(frozen=True)
class GraphView:
    """What a report shows of one build's graph: ``degrees(folder)``, the degree of each
    of its ``nodes`` (entities, keywords), read from the artefact of the build's step
    ``artefact`` (``skeleton``, ``extract``…)."""

    artefact: str
    nodes: str
    degrees: Callable[[Path], list[int]]


@dataclass(frozen=True)
class GraphKind:
    """A graph kind: its parameters, ``build(plan, label, config, build_context)``, which
    adds the steps of one build variant to the plan, and the ``view`` a report draws."""

    name: str
    summary: str
    params: tuple[Param, ...]
    build: Callable[..., None]
    view: GraphView
    problems: Callable[[int, Config], Iterator[Problem]] = _no_graph_problems


@dataclass(frozen=True)
class ExtractionMethod:
    """An extraction method: its parameters; ``config(settings, models, llm_work)``, the
    ``extract`` steps' config (what their fingerprints cover); ``extract(chunks, config,
    run)``, one ``Extraction`` per chunk, in order (an iterator where the method streams
    them); ``llm_calls_per_chunk``, its LLM requests per
    chunk at most (before retries); ``triples(extraction, chunk)``, the (subject,
    predicate, object) triples a chunk's relationships state (RAS's text-to-triples);
    and, where one cache entry holds a chunk's whole extraction (no LLM call),
    ``keys(chunks, run)``, that entry's key per chunk: an ``extract`` step takes the
    chunks whose key its earlier artefact holds from there (``kgrag.steps.skeleton``).
    ``kgrag.graphs.extraction.methods`` declares them."""

    name: str
    summary: str
    params: tuple[Param, ...]
    config: Callable[..., Config]
    extract: Callable[..., Iterable[Any]]
    llm_calls_per_chunk: int
    triples: Callable[..., list[tuple[str, str, str]]]
    keys: Callable[..., list[str]] | None = None

    @property
    def uses_llm(self) -> bool:
        return self.llm_calls_per_chunk > 0


@dataclass(frozen=True)
class TrainingMethod:
    """A retriever-training method: its parameters, ``build(plan, name, config, env)``,
    which adds one entry's steps to the plan and returns the step whose artefact folder
    holds the trained model, ``model_kind``, the kind of every step that writes a model,
    and ``trains``, what that model is. An "embedder" (ARK's; ``model/`` in
    sentence-transformers' save format) is nameable by identity wherever an embedder is
    (each model step, as ARK's curriculum stages); any other model is read by the
    strategies that name the entry through a ``TrainedRef`` of that kind. ``evidence``
    is what it trains on: "chunks" (the plan chunks the corpus) or the triples of a
    knowledge-graph corpus (``Strategy.evidence``). ``problems(index, raw entry, filled
    entry, filled spec)`` yields the method's own spec checks, as a strategy's do."""

    name: str
    summary: str
    params: tuple[Param, ...]
    build: Callable[..., str]
    model_kind: str
    trains: str = "embedder"
    evidence: str = "chunks"
    problems: Callable[[int, Config, Config, Config], Iterator[Problem]] = _no_problems


def param_names(params: tuple[Param, ...]) -> set[str]:
    return {p.name for p in params}


# Every strategy takes these besides its own (``name`` and ``strategy`` are the entry's).
STRATEGY_COMMON = (
    Param("budget_tokens", {"type": "integer", "minimum": 1, "maximum": 1_000_000},
          "Context budget λ in tokens.", default=2000, sweep=True),
    Param("questions", {"type": "integer", "minimum": 1, "maximum": COUNT_MAX},
          "Retrieve for the first N questions only, for a strategy whose per-question LLM "
          "call (hugrag's causal filter) does not fit the run for every question; its "
          "metrics average over those N. Absent: every question."),
)


