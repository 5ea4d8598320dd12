"""Generate the spec schema's declared parts from the registries, and keep the published
schema current.

This module rewrites what the registries own: the ``strategy`` / ``kind`` / ``method``
enums (extraction's and training's) and every declared parameter, the ``evaluate.metrics``
pattern (``kgrag.eval.registry``) and the ``corpus.dataset`` enum
(``kgrag.corpus.importers.IMPORTERS``). The rest of ``pipeline.schema.json`` (the
settings of corpus, models, chunking, answer and evaluate, and each object's own
description and ``name``) is written by hand. The schema is a flat union (one ``strategy`` object
takes every strategy's parameters) so that editors complete every key;
``kgrag.spec.references`` then checks which parameter applies where. A parameter several
declarations take is written once, its description prefixed by who takes it.

Run ``python -m kgrag.spec.generate`` after changing a declaration; a test fails while the
published file differs from what this writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from kgrag.declarations import NO_DEFAULT, STRATEGY_COMMON, Param, Strategy
from kgrag.spec.references import declared
from kgrag.spec.schema import SCHEMA, SCHEMA_PATH
from kgrag.training import TRAINING_METHODS

SWEEP = "A list runs every value (a sweep)."


def generated_schema(schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    """``schema`` with its declared parts rewritten from the declarations."""
    from kgrag.graphs.extraction.methods import DEFAULT_METHOD, EXTRACTION_COMMON

    strategies, kinds, methods = declared()
    defs = schema["$defs"]
    strategy = _object(defs["strategy"], "strategy", strategies.values(), _strategy_takers,
                       STRATEGY_COMMON)
    graph = _object(defs["graph"], "kind", kinds.values(), _takers)
    extraction = _object(defs["extraction"], "method", methods.values(), _takers,
                         EXTRACTION_COMMON)
    extraction["properties"]["method"]["default"] = DEFAULT_METHOD
    training = _object(defs["training"], "method", TRAINING_METHODS.values(), _takers)
    return {**schema, "$defs": {**defs, "strategy": strategy, "graph": graph,
                                "extraction": extraction, "training": training,
                                "evaluate": _metrics(defs["evaluate"]),
                                "corpus": _datasets(defs["corpus"])}}


def _metrics(evaluate: dict[str, Any]) -> dict[str, Any]:
    """``evaluate`` with its metric names from the registry (``kgrag.eval.registry``): a
    family (``recall@``) takes a cut-off of 1 or more."""
    from kgrag.eval.registry import METRICS

    names = [name for name in METRICS if not name.endswith("@")] + [
        f"{name}[1-9][0-9]{{0,3}}" for name in METRICS if name.endswith("@")]
    metrics = evaluate["properties"]["metrics"]
    items = {**metrics["items"], "pattern": f"^({'|'.join(names)})$"}
    return {**evaluate, "properties": {**evaluate["properties"],
                                       "metrics": {**metrics, "items": items}}}


def _datasets(corpus: dict[str, Any]) -> dict[str, Any]:
    """``corpus`` with its dataset shapes from ``IMPORTERS`` (``kgrag.corpus.importers``)."""
    from kgrag.corpus.importers import IMPORTERS

    dataset = {**corpus["properties"]["dataset"], "enum": list(IMPORTERS)}
    return {**corpus, "properties": {**corpus["properties"], "dataset": dataset}}


def _takers(declaration: Any) -> list[tuple[str, Param]]:
    return [(declaration.name, param) for param in declaration.params]


def _strategy_takers(declaration: Strategy) -> list[tuple[str, Param]]:
    """A strategy's parameters, those of a group named with the switch that enables them."""
    return _takers(declaration) + [
        (f"{declaration.name} ({group.switch}: {group.value})", param)
        for group in declaration.groups for param in group.params]


def _object(current: dict[str, Any], switch: str, declarations: Iterable[Any],
            takers_of: Callable[[Any], list[tuple[str, Param]]],
            common: tuple[Param, ...] = ()) -> dict[str, Any]:
    """One union object: its hand-written keys and ``name``, the ``switch`` enum described
    by each declaration's summary, the common parameters, then every declared one."""
    declarations = list(declarations)
    properties: dict[str, Any] = {}
    if "name" in current["properties"]:
        properties["name"] = current["properties"]["name"]
    properties[switch] = {
        "description": " ".join(f"{d.name}: {d.summary}" for d in declarations),
        "enum": [d.name for d in declarations]}
    for param in common:
        properties[param.name] = _property([("", param)])
    takers: dict[str, list[tuple[str, Param]]] = {}
    for d in declarations:
        for who, param in takers_of(d):
            takers.setdefault(param.name, []).append((who, param))
    for name, taken in takers.items():
        properties[name] = _property(taken)
    return {**current, "properties": properties}


def _property(taken: list[tuple[str, Param]]) -> dict[str, Any]:
    """The schema of a parameter that the declarations ``taken`` (who, how) declare."""
    first = taken[0][1]
    if any(p.schema != first.schema or p.sweep != first.sweep for _, p in taken):
        raise ValueError(f"parameter {first.name!r} is declared with different schemas by "
                         f"{', '.join(who for who, _ in taken)}")
    by_text: dict[str, list[str]] = {}  # who writes the same description, in order
    for who, p in taken:
        by_text.setdefault(p.description, []).append(who)
    description = " ".join(f"{' / '.join(who)}: {text}" if who != [""] else text
                           for text, who in by_text.items())
    if first.sweep:
        description += " " + SWEEP
    out: dict[str, Any] = {"description": description}
    if first.sweep:
        out |= {"type": [first.schema["type"], "array"],
                **{k: v for k, v in first.schema.items() if k != "type"},
                "items": dict(first.schema), "minItems": 1, "uniqueItems": True}
    else:
        out |= first.schema
    defaults = {json.dumps(p.default) for _, p in taken if p.default is not NO_DEFAULT}
    if len(defaults) == 1 and all(p.default is not NO_DEFAULT for _, p in taken):
        out["default"] = first.default
    return out


def write() -> None:
    """Rewrite the published schema file from the declarations."""
    text = json.dumps(generated_schema(), indent=2, ensure_ascii=False) + "\n"
    SCHEMA_PATH.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write()
