"""What a schema error says to a user: the expected type or values, the bound, the
nearest allowed key ("did you mean"), the value as written."""

from __future__ import annotations

import difflib
import json
from typing import Any

from jsonschema import ValidationError

from kgrag.limits import PLAIN_TEXT
from kgrag.spec.reading import AMBIGUOUS_BOOLEAN, AMBIGUOUS_NUMBER, quote, show
from kgrag.spec.schema import VALIDATOR

_CLOSE = 0.7  # difflib similarity for "did you mean"; 0.6 pairs 'base' with 'answer'
_TYPE_WORDS = {"object": "mapping", "array": "list"}
_BOUND_SYMBOLS = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}


def unknown_key(key: Any, allowed: list[str]) -> str:
    """Say which key is unknown and suggest the closest allowed one."""
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=_CLOSE)
    if close:
        return f"unknown key {quote(key)}; did you mean '{close[0]}'?"
    return f"unknown key {quote(key)}; allowed keys here: {', '.join(allowed)}"


def describe(error: ValidationError) -> str:
    """Translate one validator error (other than unknown and missing keys) into words."""
    keyword, expected, value = error.validator, error.validator_value, error.instance
    if keyword == "type":
        return _type_message(error.schema, value)
    if keyword == "enum":
        return _enum_message(expected, value)
    if keyword in _BOUND_SYMBOLS:
        return f"must be {_BOUND_SYMBOLS[keyword]} {expected}, got {show(value)}"
    if keyword == "pattern" and expected == PLAIN_TEXT:
        return ("must not hold a control character (a line break, a tab…) in a path or a "
                f"model name, got {quote(value)}")
    if keyword == "pattern":
        return f"{quote(value)} does not match the required pattern {expected}"
    if keyword == "required":  # inside an alternative (a served model's keys)
        missing = ", ".join(quote(key) for key in expected if key not in value)
        return f"missing required key {missing}"
    if keyword == "anyOf":  # the alternative of the value's own type says what is wrong
        fitting = [e for e in error.context if e.validator != "type"]
        if fitting:
            return describe(fitting[0])
    if keyword == "minLength":
        if expected == 1:
            return "must not be empty"
        return f"must be at least {expected} characters long, got {quote(value)}"
    if keyword == "maxLength":  # the value itself may be megabytes long: give its length
        return f"must be at most {expected} characters long, got {len(value)}"
    if keyword == "minItems":
        return f"must list at least {expected} item(s), got {len(value)}"
    if keyword == "uniqueItems":
        repeated = f"{_first_repeat(value)} is listed more than once"
        if _is_sweep(error.schema):  # a repeated value would compile to the same step twice
            return f"a sweep runs each value once; {repeated}"
        return f"items must be unique; {repeated}"
    return error.message


def _type_message(schema: dict[str, Any], value: Any) -> str:
    """Say what type was expected, or why a value of an allowed type is refused."""
    names = _type_names(schema)
    integral = isinstance(value, int) and "integer" in names  # an int past every float
    if ("number" in names or integral) and _unusable_number(value):
        return _not_finite(value)
    if "string" in names and isinstance(value, str):  # only a NUL fails the string type
        return "must not contain a NUL character (\\0)"
    expected = f"expected {_expected_types(schema)}, got {show(value)}"
    if isinstance(value, str) and AMBIGUOUS_NUMBER.match(value) and (
            "integer" in names or "number" in names):
        return (f"{expected}: YAML versions disagree on a leading 0 (octal), on colons "
                "(base 60), on 0b (binary) and on underscores; write the number in plain "
                "decimal")
    if isinstance(value, str) and AMBIGUOUS_BOOLEAN.match(value) and "boolean" in names:
        return (f"{expected}: YAML versions disagree on yes, no, on and off (booleans to "
                "YAML 1.1, text to YAML 1.2); write true or false")
    return expected


def _is_numeric(value: Any) -> bool:
    """An int or float as Python sees it; YAML's ``true`` is a bool, not a number."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unusable_number(value: Any) -> bool:
    """A number the schema's ``number`` type refuses: NaN, ±inf, or an int past any float."""
    return _is_numeric(value) and not VALIDATOR.is_type(value, "number")


def _not_finite(value: float) -> str:
    """Say why a number that looks fine to YAML is refused."""
    if isinstance(value, float):
        return f"must be a finite number, got {show(value)}"
    return f"is too large for a number (the limit is about 1.8e308), got {show(value)}"


def _type_names(schema: dict[str, Any]) -> list[str]:
    """The ``type`` keyword of a schema as a list."""
    types = schema.get("type")
    return types if isinstance(types, list) else [] if types is None else [types]


def _is_sweep(schema: dict[str, Any]) -> bool:
    """A sweepable parameter takes one value or a list of them (``[integer, array]``)."""
    names = _type_names(schema)
    return len(names) == 2 and "array" in names


def _expected_types(schema: dict[str, Any]) -> str:
    """Describe the allowed types, with the numeric bounds the schema sets."""
    names = _type_names(schema)
    bounds = [
        f"{symbol} {schema[keyword]}"
        for keyword, symbol in _BOUND_SYMBOLS.items()
        if keyword in schema
    ]
    words = []
    for name in names:
        word = _TYPE_WORDS.get(name, name)
        if name in ("integer", "number") and bounds:
            word += " " + " and ".join(bounds)
        words.append(word)
    if _is_sweep(schema):
        return f"{words[names.index('array') - 1]} or a list of them (a sweep)"
    return " or ".join(words)


def _enum_message(options: list[Any], value: Any) -> str:
    """List the allowed values and suggest the closest to what was written."""
    listed = ", ".join(str(option) for option in options)
    expected = f"expected one of {listed}" if len(options) > 1 else f"expected {listed}"
    message = f"{expected}; got {quote(value)}"
    if isinstance(value, str):
        words = [option for option in options if isinstance(option, str)]
        close = difflib.get_close_matches(value, words, n=1, cutoff=_CLOSE)
        if close:
            message += f" (did you mean '{close[0]}'?)"
    return message


def _first_repeat(items: list[Any]) -> str:
    """The first item that occurs twice, shown for the message.

    Numbers compare by value, as JSON Schema compares them: ``1.0`` repeats ``1``.
    """
    seen: set[Any] = set()
    for item in items:
        key = item if _is_numeric(item) else json.dumps(item, sort_keys=True, default=str)
        if key in seen:
            return quote(item)
        seen.add(key)
    return "an item"


def type_word(value: Any) -> str:
    """Name the kind of a YAML value in users' words."""
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"a single value ({show(value)})"
