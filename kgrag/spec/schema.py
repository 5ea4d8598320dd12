"""The pipeline JSON Schema, its validator, and default filling.

The schema file is the single source of truth for what a spec may contain and
what the defaults are, so the code reads defaults from it instead of repeating
them; ``fill_defaults`` is what turns a short user spec into the complete
configuration every later stage (and every cache key) sees.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

SCHEMA_PATH: Path = Path(__file__).with_name("pipeline.schema.json")
"""The schema file shipped inside the package (``schemas/`` links to it)."""

SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
"""The parsed schema. Treat it as read-only: it is shared by every caller."""

Draft202012Validator.check_schema(SCHEMA)


def _is_strict_integer(checker: object, instance: object) -> bool:
    """Accept only real ints: JSON Schema counts ``8.0`` as an integer, but a
    float reaching ``range()`` or llama.cpp would fail far from the spec, and
    YAML's ``true`` is a bool, not a number. An int past the largest float is
    refused too: the bounds (``minimum``, ``maximum``) check only what the
    ``number`` type accepts, so it would pass every bound."""
    return (isinstance(instance, int) and not isinstance(instance, bool)
            and _is_finite_number(checker, instance))


def _is_finite_number(_checker: object, instance: object) -> bool:
    """Accept ints and floats a float can hold, and nothing else.

    ``.nan`` passes every bound (it compares false with everything) and ``.inf``
    passes every lower one; either would fail far from the spec, in the plan's
    JSON fingerprints or in llama.cpp, as would an int too large for a float.
    """
    if isinstance(instance, bool) or not isinstance(instance, (int, float)):
        return False
    try:
        return math.isfinite(instance)
    except OverflowError:  # an int past the largest float
        return False


def _is_text(_checker: object, instance: object) -> bool:
    """Accept strings without a NUL character (a ``"\\0"`` escape in YAML): no spec
    value needs one, and in a path it fails the system call with a ValueError."""
    return isinstance(instance, str) and "\0" not in instance


@functools.cache
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` read as ECMA-262 reads it, where ``$`` matches only at the end of the
    text: Python's ``$`` also matches before a final line break, so ``"qs\\n"`` would pass
    a name's ``^[A-Za-z0-9_.-]+$`` and become a folder name ending in a newline. Each ``$``
    that is neither escaped nor in a character class becomes ``\\Z``; the schema's
    patterns stay ECMA-262, as editors read them."""
    out, escaped, in_class = [], False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            char = r"\Z"
        out.append(char)
    return re.compile("".join(out))


def _pattern(validator: Any, pattern: str, instance: Any, _schema: Any
             ) -> Iterator[ValidationError]:
    """The ``pattern`` keyword with ECMA-262's end of text (``_ecma_regex``)."""
    if validator.is_type(instance, "string") and not _ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


SpecValidator = validators.extend(
    Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many({
        "integer": _is_strict_integer,
        "number": _is_finite_number,
        "string": _is_text,
    }),
)
"""Draft 2020-12 validation, except that ``integer`` means a Python int, ``number``
a finite one, ``string`` one without NUL, and a ``pattern``'s ``$`` the end of the text."""

VALIDATOR = SpecValidator(SCHEMA)
"""The validator for whole spec documents."""


def _resolve_ref(subschema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow local ``$ref``s (``#/...``) so callers see the keywords that apply.

    Keywords written next to a ``$ref`` win over the referenced ones, as they
    would when both apply to the same value.
    """
    seen: set[str] = set()
    while "$ref" in subschema:
        ref = subschema["$ref"]
        if not ref.startswith("#/") or ref in seen:
            raise ValueError(f"cannot resolve schema reference {ref!r}")
        seen.add(ref)
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        siblings = {key: value for key, value in subschema.items() if key != "$ref"}
        subschema = {**target, **siblings}
    return subschema


def fill_defaults(instance: Any, schema: dict[str, Any]) -> Any:
    """Return a copy of ``instance`` with every missing defaulted property filled.

    Defaults are filled recursively, including inside defaults that are
    themselves objects or arrays, so a missing ``models`` becomes the full
    ``{"llm": {...}, "embedder": {...}}``. ``schema`` is the root schema that
    local ``$ref``s point into. The input is never mutated.
    """
    return _fill(instance, schema, schema)


def _fill(value: Any, subschema: dict[str, Any], root: dict[str, Any]) -> Any:
    """Fill defaults in ``value`` as described by ``subschema``."""
    subschema = _resolve_ref(subschema, root)
    if isinstance(value, dict):
        properties = subschema.get("properties", {})
        filled = {key: _fill(item, properties.get(key, {}), root) for key, item in value.items()}
        for key, property_schema in properties.items():
            if key in filled:
                continue
            resolved = _resolve_ref(property_schema, root)
            if "default" in resolved:
                filled[key] = _fill(copy.deepcopy(resolved["default"]), resolved, root)
        return filled
    items = subschema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_fill(item, items, root) for item in value]
    return copy.deepcopy(value)
