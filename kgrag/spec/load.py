"""Check and load pipeline spec files.

Every problem is reported as ``<file>:<line>: <key path>: <what is wrong>`` and
all problems are reported at once, sorted by line, so a user can fix a spec in
one pass: the file is read with the line of every key (``kgrag.spec.reading``), then
validated against the schema (its errors worded by ``kgrag.spec.messages``) and
checked against the declarations (``kgrag.spec.references``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kgrag.configuration import Spec, find_root, freeze
from kgrag.errors import SpecProblems
from kgrag.spec.messages import describe, type_word, unknown_key
from kgrag.spec.reading import Document, Finding, KeyPath, format_path, read_document
from kgrag.spec.references import prune_defaults, reference_problems
from kgrag.spec.schema import SCHEMA, VALIDATOR, fill_defaults

__all__ = ["check_spec", "format_path", "load_spec"]


def check_spec(path: str | Path) -> list[str]:
    """Return every problem with the spec at ``path``, one message each; empty when valid."""
    messages, _ = _check(Path(path))
    return messages


def load_spec(path: str | Path, root: Path | None = None) -> Spec:
    """Load, validate and default-fill the spec at ``path``.

    Raises ``SpecProblems`` (a ``KgragError``) listing every problem, one per line, so the
    CLI can show them all without a traceback. ``root`` is the project its outputs go
    under (default: found from the spec's folder; a replay names its own).
    """
    path = Path(path)
    messages, document = _check(path)
    if messages:
        raise SpecProblems(messages)
    assert document.raw is not None
    absolute = path.resolve()
    return Spec(
        path=absolute,
        root=find_root(absolute.parent) if root is None else root.resolve(),
        sha256=hashlib.sha256(document.raw).hexdigest(),
        data=freeze(document.data),
    )


def _check(path: Path) -> tuple[list[str], Document]:
    """Run every check; on success ``document.data`` is the default-filled config."""
    document = read_document(path)
    if document.fatal:
        return document.fatal, document
    data = document.data
    if not isinstance(data, dict):
        line = document.lines.get((), 1)
        document.problems.append(
            Finding(line, (), f"the spec must be a mapping of keys, got {type_word(data)}")
        )
    else:
        document.problems.extend(_schema_problems(data, document.lines))
        document.problems.extend(_duplicate_strategy_names(data, document.lines))
        if not document.problems:
            document.data = fill_defaults(data, SCHEMA)
            document.problems.extend(_semantic_problems(document.data, document.lines))
            document.problems.extend(
                Finding(_line_for(path, document.lines), path, text)
                for path, text in reference_problems(data, document.data))
            document.data = prune_defaults(document.data)
    ordered = sorted(document.problems, key=lambda p: (p.line, format_path(p.path), p.text))
    messages = [f"{path}:{p.line}: {format_path(p.path)}: {p.text}" for p in ordered]
    return list(dict.fromkeys(messages)), document


def _line_for(path: KeyPath, lines: dict[KeyPath, int]) -> int:
    """The line of ``path``, or of its nearest ancestor that has one."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return 1


def _schema_problems(data: dict[str, Any], lines: dict[KeyPath, int]) -> Iterator[Finding]:
    """Validate against the schema and word each error for humans."""
    for error in VALIDATOR.iter_errors(data):
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties":
            allowed = list(error.schema.get("properties", {}))
            for key in error.instance:
                if key not in allowed:
                    yield Finding(_line_for((*path, key), lines), path, unknown_key(key, allowed))
        elif error.validator == "required":
            for key in error.validator_value:
                if key not in error.instance:
                    yield Finding(_line_for(path, lines), path, f"missing required key '{key}'")
        else:
            yield Finding(_line_for(path, lines), path, describe(error))


def _duplicate_strategy_names(
    data: dict[str, Any], lines: dict[KeyPath, int]
) -> Iterator[Finding]:
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
            yield Finding(
                _line_for(("query", index, "name"), lines),
                ("query", index, "name"),
                f"duplicate strategy name '{name}' (also used by {format_path(earlier)} "
                f"at line {_line_for(earlier, lines)}); strategy names must be unique",
            )
        else:
            first[name] = index


def _semantic_problems(data: dict[str, Any], lines: dict[KeyPath, int]) -> Iterator[Finding]:
    """Cross-field rules the schema cannot express, checked on the default-filled data."""
    chunking = data["chunking"]
    if chunking["overlap"] >= chunking["size"]:
        path = ("chunking", "overlap")
        where = path if path in lines else ("chunking", "size")
        yield Finding(
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
        yield Finding(
            _line_for(path, lines),
            path,
            f"only datasets {', '.join(plain[:-1])} and {plain[-1]} take a questions file; "
            f"{corpus['dataset']} brings its own questions",
        )
    converting = [name for name, shape in IMPORTERS.items() if shape.converts]
    if "max_file_mb" in corpus and corpus["dataset"] not in converting:
        path = ("corpus", "max_file_mb")
        yield Finding(_line_for(path, lines), path,
                      f"only dataset {' and '.join(converting)} takes a file size limit (it "
                      f"converts files); {corpus['dataset']} does not")
    if "missing_support" in corpus and "questions_file" not in corpus:
        path = ("corpus", "missing_support")
        yield Finding(_line_for(path, lines), path,
                      "says what to do with a questions_file's supporting ids that no "
                      "document has; name corpus.questions_file or remove it")
