"""Read a spec file into data with the line of every key, refusing what YAML must not do.

YAML is parsed to a node tree first: that keeps line numbers, lets us refuse
non-standard tags before anything is constructed (a spec must never be able to run
code), and lets us catch duplicate keys, which PyYAML would otherwise silently collapse
to the last one. Findings are kept structured (``Finding``) until ``kgrag.spec.load``
formats and sorts them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kgrag.errors import one_line

KeyPath = tuple[Any, ...]

_YAML_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _YAML_TAG + "merge"
_ALLOWED_TAGS = frozenset(
    _YAML_TAG + name for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
) | {_MERGE_TAG}
_MAX_NODES = 100_000
MAX_SHOWN = 60


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that keeps dates, and numbers and booleans YAML versions read
    differently, as text.

    A run name or description like ``2024-06-01`` is meant as a string; the
    plain SafeLoader would turn it into a ``date`` and fail the schema.
    YAML 1.1 (PyYAML's) reads ``0400`` as octal 256, ``4:16`` as base 60 (256),
    ``0b100000000`` as binary (256), ``1_024`` as 1024 and ``yes`` / ``no`` / ``on`` /
    ``off`` as booleans; YAML 1.2 (most editors') reads the first as 400 and all the others
    as text. Kept as text (``AMBIGUOUS_NUMBER``, ``AMBIGUOUS_BOOLEAN``), they mean what
    they say where a string belongs and are refused, at their line, where a number or a
    boolean does. A number with an exponent and no point (``1e-5``), text to YAML 1.1, is
    read as YAML 1.2 reads it: a float.
    """
AMBIGUOUS_NUMBER = re.compile(
    r"^[-+]?(?:0[0-9_]+"  # a leading zero: octal
    r"|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"  # colon-separated digits: base 60
    r"|0b[01_]+"  # binary
    r"|0x[0-9a-fA-F]*_[0-9a-fA-F_]*"  # hexadecimal with an underscore
    r"|[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+][0-9]+)?"  # an underscore before the
    r"|[0-9][0-9_]*\.[0-9_]*_[0-9_]*(?:[eE][-+][0-9]+)?)$")  # point, or after it
"""A number only YAML 1.1 reads as one (or as another one): octal, base 60, binary, or
digits with underscores."""
AMBIGUOUS_BOOLEAN = re.compile(r"^(?:yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF)$")
"""A boolean only YAML 1.1 reads as one; YAML 1.2 knows only true and false."""
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")
"""A number with an exponent, which YAML 1.2 reads as a float and YAML 1.1 as a float only
with a point and a signed exponent (``1.0e-5``): ``1e-5``, ``2E5`` and ``3.5e7`` are read
as the floats every editor and Python take them for, not as text."""

_SpecLoader.add_constructor(_YAML_TAG + "timestamp", _SpecLoader.construct_yaml_str)
_SpecLoader.yaml_implicit_resolvers = {
    first: [(_YAML_TAG + "str", AMBIGUOUS_NUMBER), (_YAML_TAG + "float", EXPONENT_FLOAT),
            *resolvers] if first in "+-0123456789"
    else [(_YAML_TAG + "str", AMBIGUOUS_BOOLEAN), *resolvers] if first in "yYnNoO"
    else list(resolvers)
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _TooLarge(Exception):
    """The node tree expands (through anchors and aliases) past ``_MAX_NODES``."""


@dataclass
class Finding:
    """One finding, kept structured until it is formatted and sorted."""

    line: int
    path: KeyPath
    text: str


@dataclass
class Document:
    """What reading a spec file produced: the data if it could be built, and the findings."""

    raw: bytes | None = None
    data: Any = None
    lines: dict[KeyPath, int] = field(default_factory=dict)
    problems: list[Finding] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)


def format_path(path: KeyPath) -> str:
    """Write a key path the way users read it: ``query[1].budget_tokens``."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def read_document(path: Path) -> Document:
    """Read and parse the file, checking tags and duplicate keys on the node tree."""
    document = Document()
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
        self.problems: list[Finding] = []
        self.fatal: list[Finding] = []
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
                self.fatal.append(Finding(line, path, "a key must be a plain word, not a list"))
                continue
            if not self._tag_allowed(key_node, path):
                continue
            key = _scalar_key(key_node)
            if key in first_lines:
                self.problems.append(
                    Finding(
                        line,
                        path,
                        f"duplicate key {quote(key)} (first at line {first_lines[key]}); "
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
            Finding(
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


def show(value: Any) -> str:
    """Show a value as YAML/JSON would write it, shortened if long."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    # JSON escapes only C0 controls; C1 ones and line separators are escaped too
    text = one_line(json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def quote(value: Any) -> str:
    """Show a string in single quotes (as in keys and choices), other values as JSON.

    A string holding a line break or another control character is shown as JSON, its
    escapes visible (``"qs\\n"``), so that a message stays on one line and says what
    is wrong.
    """
    if isinstance(value, str) and value.isprintable():
        text = value if len(value) <= MAX_SHOWN else value[: MAX_SHOWN - 1] + "…"
        return f"'{text}'"
    return show(value)
