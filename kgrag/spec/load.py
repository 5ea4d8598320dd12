"""Read, check and load pipeline spec files.

Every problem is reported as ``<file>:<line>: <key path>: <what is wrong>`` and
all problems are reported at once, sorted by line, so a user can fix a spec in
one pass. YAML is parsed to a node tree first: that keeps line numbers, lets us
refuse non-standard tags before anything is constructed (a spec must never be
able to run code), and lets us catch duplicate keys, which PyYAML would
otherwise silently collapse to the last one.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kgrag.configuration import Spec, find_root, freeze
from kgrag.errors import KgragError
from kgrag.spec.references import prune_defaults, reference_problems
from kgrag.spec.schema import SCHEMA, VALIDATOR, fill_defaults

KeyPath = tuple[Any, ...]

_YAML_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _YAML_TAG + "merge"
_ALLOWED_TAGS = frozenset(
    _YAML_TAG + name for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
) | {_MERGE_TAG}
_MAX_NODES = 100_000
_MAX_SHOWN = 60
_CLOSE = 0.7  # difflib similarity for "did you mean"; 0.6 pairs 'base' with 'answer'
_TYPE_WORDS = {"object": "mapping", "array": "list"}
_BOUND_SYMBOLS = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that keeps dates, and numbers YAML versions read differently, as text.

    A run name or description like ``2024-06-01`` is meant as a string; the
    plain SafeLoader would turn it into a ``date`` and fail the schema.
    YAML 1.1 (PyYAML's) reads ``0400`` as octal 256 and ``4:16`` as base 60, 256;
    YAML 1.2 (most editors') reads the first as 400 and the second as text. Kept as
    text (``_AMBIGUOUS_NUMBER``), they mean what they say where a string belongs and
    are refused, at their line, where a number does.
    """


_AMBIGUOUS_NUMBER = re.compile(
    r"^[-+]?(?:0[0-9_]+|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)$")
"""A number with a leading zero (YAML 1.1's octal) or colon-separated digits (its base 60)."""

_SpecLoader.add_constructor(_YAML_TAG + "timestamp", _SpecLoader.construct_yaml_str)
_SpecLoader.yaml_implicit_resolvers = {
    first: [(_YAML_TAG + "str", _AMBIGUOUS_NUMBER), *resolvers]
    if first in "+-0123456789" else list(resolvers)
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _TooLarge(Exception):
    """The node tree expands (through anchors and aliases) past ``_MAX_NODES``."""


@dataclass
class _Problem:
    """One finding, kept structured until it is formatted and sorted."""

    line: int
    path: KeyPath
    text: str


@dataclass
class _Document:
    """What reading a spec file produced: the data if it could be built, and the findings."""

    raw: bytes | None = None
    data: Any = None
    lines: dict[KeyPath, int] = field(default_factory=dict)
    problems: list[_Problem] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)


def check_spec(path: str | Path) -> list[str]:
    """Return every problem with the spec at ``path``, one message each; empty when valid."""
    messages, _ = _check(Path(path))
    return messages


def load_spec(path: str | Path, root: Path | None = None) -> Spec:
    """Load, validate and default-fill the spec at ``path``.

    Raises ``KgragError`` listing every problem (one per line) so the CLI can
    show them all without a traceback. ``root`` is the project its outputs go
    under (default: found from the spec's folder; a replay names its own).
    """
    path = Path(path)
    messages, document = _check(path)
    if messages:
        raise KgragError("\n".join(messages))
    assert document.raw is not None
    absolute = path.resolve()
    return Spec(
        path=absolute,
        root=find_root(absolute.parent) if root is None else root.resolve(),
        sha256=hashlib.sha256(document.raw).hexdigest(),
        data=freeze(document.data),
    )


def format_path(path: KeyPath) -> str:
    """Write a key path the way users read it: ``query[1].budget_tokens``."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def _check(path: Path) -> tuple[list[str], _Document]:
    """Run every check; on success ``document.data`` is the default-filled config."""
    document = _read(path)
    if document.fatal:
        return document.fatal, document
    data = document.data
    if not isinstance(data, dict):
        line = document.lines.get((), 1)
        document.problems.append(
            _Problem(line, (), f"the spec must be a mapping of keys, got {_type_word(data)}")
        )
    else:
        document.problems.extend(_schema_problems(data, document.lines))
        document.problems.extend(_duplicate_strategy_names(data, document.lines))
        if not document.problems:
            document.data = fill_defaults(data, SCHEMA)
            document.problems.extend(_semantic_problems(document.data, document.lines))
            document.problems.extend(
                _Problem(_line_for(path, document.lines), path, text)
                for path, text in reference_problems(data, document.data))
            document.data = prune_defaults(document.data)
    ordered = sorted(document.problems, key=lambda p: (p.line, format_path(p.path), p.text))
    messages = [f"{path}:{p.line}: {format_path(p.path)}: {p.text}" for p in ordered]
    return list(dict.fromkeys(messages)), document


def _read(path: Path) -> _Document:
    """Read and parse the file, checking tags and duplicate keys on the node tree."""
    document = _Document()
    try:
        document.raw = path.read_bytes()
    except FileNotFoundError:
        document.fatal.append(f"{path}: spec file not found")
        return document
    except IsADirectoryError:
        document.fatal.append(f"{path}: is a folder, not a spec file")
        return document
    except OSError as exc:
        document.fatal.append(f"{path}: cannot read the spec file: {exc.strerror}")
        return document
    unreadable = _not_text(path, document.raw)
    if unreadable:
        document.fatal.append(unreadable)
        return document

    loader = _SpecLoader(document.raw)
    try:
        root = loader.get_single_node()
        if root is None:
            document.fatal.append(
                f"{path}:1: the spec file is empty; it needs at least 'name' and 'corpus'"
            )
            return document
        scan = _Scanner(document.lines)
        scan.visit(root, (), weak=False)
        document.problems.extend(scan.problems)
        if scan.fatal:
            document.fatal.extend(
                f"{path}:{p.line}: {format_path(p.path)}: {p.text}" for p in scan.fatal
            )
            return document
        document.data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        document.fatal.append(_syntax_message(path, exc, max(len(document.raw.splitlines()), 1)))
    except yaml.YAMLError as exc:
        document.fatal.append(f"{path}: cannot read the YAML: {exc}")
    except _TooLarge:
        document.fatal.append(
            f"{path}: the spec expands to more than {_MAX_NODES} values "
            "(recursive or deeply repeated anchors and aliases?)"
        )
    except RecursionError:
        document.fatal.append(
            f"{path}: the spec is nested too deeply (or an anchor refers to itself)"
        )
    except (ValueError, KeyError, TypeError) as exc:
        document.fatal.append(f"{path}: a value could not be read: {exc}")
    finally:
        loader.dispose()
    return document


def _not_text(path: Path, raw: bytes) -> str | None:
    """Say where the file stops being text, or ``None`` when YAML can read all of it.

    PyYAML reports a bad byte as a traceback with a character position; users need
    the byte, its offset and its line to find it in an editor. A spec is UTF-8 (a
    leading byte-order mark is fine) without the control characters YAML refuses.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    found = _SpecLoader.NON_PRINTABLE.search(text)
    if found is None:
        return None
    code = ord(found.group())
    what = f"byte 0x{code:02x}" if code < 0x80 else f"character U+{code:04X}"
    offset = len(text[: found.start()].encode())
    line = text.count("\n", 0, found.start()) + 1
    return (f"{path}:{line}: not plain text ({what} at offset {offset}); "
            "a spec may hold no control characters")


def _syntax_message(path: Path, exc: yaml.MarkedYAMLError, last_line: int) -> str:
    """Word a YAML syntax error as ``file:line: YAML syntax error: ...``.

    An error found at the end of the stream is reported on the last line, not
    on a line past the end of the file.
    """
    mark = exc.problem_mark or exc.context_mark
    line = min(mark.line + 1, last_line) if mark is not None else 1
    parts = [part for part in (exc.context, exc.problem) if part]
    return f"{path}:{line}: YAML syntax error: {'; '.join(parts) or 'unreadable'}"


class _Scanner:
    """Walks the composed node tree before anything is constructed.

    It records the line of every key path, refuses tags outside the YAML core
    set (``!!python/...`` and custom ``!tags``), and spots duplicate keys.
    """

    def __init__(self, lines: dict[KeyPath, int]) -> None:
        self.lines = lines
        self.problems: list[_Problem] = []
        self.fatal: list[_Problem] = []
        self.count = 0

    def visit(self, node: Node, path: KeyPath, *, weak: bool) -> None:
        """Scan ``node`` found at ``path``; ``weak`` line entries never overwrite others.

        Keys pulled in by a ``<<`` merge are weak: keys written in the mapping
        itself take precedence, for line numbers as for values.
        """
        self.count += 1
        if self.count > _MAX_NODES:
            raise _TooLarge
        self._note(path, node.start_mark.line + 1, weak=weak)
        if not self._tag_allowed(node, path):
            return
        if isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                self.visit(item, (*path, index), weak=weak)
        elif isinstance(node, MappingNode):
            self._visit_mapping(node, path, weak=weak)

    def _visit_mapping(self, node: MappingNode, path: KeyPath, *, weak: bool) -> None:
        """Scan one mapping's own keys, then the mappings merged into it."""
        first_lines: dict[Any, int] = {}
        merged: list[Node] = []
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:
                merged.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                self.fatal.append(_Problem(line, path, "a key must be a plain word, not a list"))
                continue
            if not self._tag_allowed(key_node, path):
                continue
            key = _scalar_key(key_node)
            if key in first_lines:
                self.problems.append(
                    _Problem(
                        line,
                        path,
                        f"duplicate key {_quote(key)} (first at line {first_lines[key]}); "
                        "YAML would silently keep only the last one",
                    )
                )
            else:
                first_lines[key] = line
            self.visit(value_node, (*path, key), weak=weak)
            self._note((*path, key), line, weak=weak)
        for source in merged:
            if isinstance(source, SequenceNode):
                if not self._tag_allowed(source, path):
                    continue
                for part in source.value:
                    self.visit(part, path, weak=True)
            else:
                self.visit(source, path, weak=True)

    def _tag_allowed(self, node: Node, path: KeyPath) -> bool:
        """Refuse any tag but the YAML core ones: others could construct Python objects."""
        if node.tag in _ALLOWED_TAGS:
            return True
        short = node.tag.replace(_YAML_TAG, "!!")
        self.fatal.append(
            _Problem(
                node.start_mark.line + 1,
                path,
                f"tags like !!python/object are not allowed in a spec (found {short}); "
                "write plain values",
            )
        )
        return False

    def _note(self, path: KeyPath, line: int, *, weak: bool) -> None:
        """Record the line for ``path``."""
        if weak:
            self.lines.setdefault(path, line)
        else:
            self.lines[path] = line


def _scalar_key(node: ScalarNode) -> Any:
    """The Python value a scalar key will have, so paths match the validator's."""
    if node.tag == _YAML_TAG + "str":
        return node.value
    loader = _SpecLoader("")
    try:
        return loader.construct_object(node)
    finally:
        loader.dispose()


def _line_for(path: KeyPath, lines: dict[KeyPath, int]) -> int:
    """The line of ``path``, or of its nearest ancestor that has one."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return 1


def _schema_problems(data: dict[str, Any], lines: dict[KeyPath, int]) -> Iterator[_Problem]:
    """Validate against the schema and word each error for humans."""
    for error in VALIDATOR.iter_errors(data):
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties":
            allowed = list(error.schema.get("properties", {}))
            for key in error.instance:
                if key not in allowed:
                    yield _Problem(_line_for((*path, key), lines), path, _unknown_key(key, allowed))
        elif error.validator == "required":
            for key in error.validator_value:
                if key not in error.instance:
                    yield _Problem(_line_for(path, lines), path, f"missing required key '{key}'")
        else:
            yield _Problem(_line_for(path, lines), path, _describe(error))


def _unknown_key(key: Any, allowed: list[str]) -> str:
    """Say which key is unknown and suggest the closest allowed one."""
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=_CLOSE)
    if close:
        return f"unknown key {_quote(key)}; did you mean '{close[0]}'?"
    return f"unknown key {_quote(key)}; allowed keys here: {', '.join(allowed)}"


def _describe(error: ValidationError) -> str:
    """Translate one validator error (other than unknown and missing keys) into words."""
    keyword, expected, value = error.validator, error.validator_value, error.instance
    if keyword == "type":
        return _type_message(error.schema, value)
    if keyword == "enum":
        return _enum_message(expected, value)
    if keyword in _BOUND_SYMBOLS:
        return f"must be {_BOUND_SYMBOLS[keyword]} {expected}, got {_show(value)}"
    if keyword == "pattern":
        return f"{_quote(value)} does not match the required pattern {expected}"
    if keyword == "minLength":
        if expected == 1:
            return "must not be empty"
        return f"must be at least {expected} characters long, got {_quote(value)}"
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
    expected = f"expected {_expected_types(schema)}, got {_show(value)}"
    if isinstance(value, str) and _AMBIGUOUS_NUMBER.match(value) and (
            "integer" in names or "number" in names):
        return (f"{expected}: YAML versions disagree on a leading 0 (octal) and on colons "
                "(base 60); write the number in plain decimal")
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
        return f"must be a finite number, got {_show(value)}"
    return f"is too large for a number (the limit is about 1.8e308), got {_show(value)}"


def _type_names(schema: dict[str, Any]) -> list[str]:
    """The ``type`` keyword of a schema as a list."""
    types = schema.get("type")
    return types if isinstance(types, list) else [types]


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
    message = f"{expected}; got {_quote(value)}"
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
            return _quote(item)
        seen.add(key)
    return "an item"


def _duplicate_strategy_names(
    data: dict[str, Any], lines: dict[KeyPath, int]
) -> Iterator[_Problem]:
    """Strategy names label result rows and output files, so they must be unique."""
    strategies = data.get("query")
    if not isinstance(strategies, list):
        return
    first: dict[str, int] = {}
    for index, strategy in enumerate(strategies):
        if not isinstance(strategy, dict) or not isinstance(strategy.get("name"), str):
            continue
        name = strategy["name"]
        if name in first:
            earlier = ("query", first[name], "name")
            yield _Problem(
                _line_for(("query", index, "name"), lines),
                ("query", index, "name"),
                f"duplicate strategy name '{name}' (also used by {format_path(earlier)} "
                f"at line {_line_for(earlier, lines)}); strategy names must be unique",
            )
        else:
            first[name] = index


def _semantic_problems(data: dict[str, Any], lines: dict[KeyPath, int]) -> Iterator[_Problem]:
    """Cross-field rules the schema cannot express, checked on the default-filled data."""
    chunking = data["chunking"]
    if chunking["overlap"] >= chunking["size"]:
        path = ("chunking", "overlap")
        where = path if path in lines else ("chunking", "size")
        yield _Problem(
            _line_for(where, lines),
            path,
            f"must be smaller than chunking.size ({chunking['size']}), "
            f"got {chunking['overlap']}; chunks would never advance",
        )
    from kgrag.corpus.importers import IMPORTERS  # the dataset shapes, declared there

    corpus = data["corpus"]
    plain = [name for name, shape in IMPORTERS.items() if not shape.questions]
    if "questions_file" in corpus and corpus["dataset"] not in plain:
        path = ("corpus", "questions_file")
        yield _Problem(
            _line_for(path, lines),
            path,
            f"only datasets {', '.join(plain[:-1])} and {plain[-1]} take a questions file; "
            f"{corpus['dataset']} brings its own questions",
        )


def _show(value: Any) -> str:
    """Show a value as YAML/JSON would write it, shortened if long."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _quote(value: Any) -> str:
    """Show a string in single quotes (as in keys and choices), other values as JSON.

    A string holding a line break or another control character is shown as JSON, its
    escapes visible (``"qs\\n"``), so that a message stays on one line and says what
    is wrong.
    """
    if isinstance(value, str) and value.isprintable():
        text = value if len(value) <= _MAX_SHOWN else value[: _MAX_SHOWN - 1] + "…"
        return f"'{text}'"
    return _show(value)


def _type_word(value: Any) -> str:
    """Name the kind of a YAML value in users' words."""
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"a single value ({_show(value)})"
