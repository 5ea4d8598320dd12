"""Spec validation messages: every problem at once, with file, line and key path."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from kgrag.errors import KgragError
from kgrag.spec import check_spec, load_spec

VALID_HEAD = """\
name: demo
corpus:
  dataset: musique
  path: data/musique.jsonl
"""


def write(folder: Path, *parts: str, name: str = "spec.yaml") -> Path:
    """Write a spec file from parts (each dedented) and return its path."""
    path = folder / name
    path.write_text("".join(textwrap.dedent(part) for part in parts), encoding="utf-8")
    return path


def test_valid_spec_has_no_messages(tmp_path: Path) -> None:
    assert check_spec(write(tmp_path, VALID_HEAD)) == []


def test_utf8_byte_order_mark_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + VALID_HEAD.encode())
    assert check_spec(path) == []


def test_top_level_typo_suggests_key_on_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "chunkng:\n  size: 128\n")
    assert check_spec(path) == [
        f"{path}:5: (top level): unknown key 'chunkng'; did you mean 'chunking'?"
    ]


def test_nested_typo_points_at_the_unknown_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        VALID_HEAD,
        """\
        query:
          - name: dense
            strategy: naive
            budget_tokns: 500
        """,
    )
    assert check_spec(path) == [
        f"{path}:8: query[0]: unknown key 'budget_tokns'; did you mean 'budget_tokens'?"
    ]


def test_unknown_key_without_close_match_lists_allowed_keys(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "chunking:\n  zebra: 1\n")
    assert check_spec(path) == [
        f"{path}:6: chunking: unknown key 'zebra'; allowed keys here: size, overlap, title"
    ]


def test_wrong_type_message_names_type_minimum_and_value(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        VALID_HEAD,
        """\
        query:
          - name: small
            strategy: naive
          - name: big
            strategy: naive
            budget_tokens: lots
        """,
    )
    assert check_spec(path) == [
        f'{path}:10: query[1].budget_tokens: expected integer ≥ 1 and ≤ 1000000 or a list of them (a sweep), got "lots"'
    ]


@pytest.mark.parametrize(
    ("value", "shown"),
    [("true", "true"), ("256.0", "256.0"), ("[1, 2]", "[1, 2]"), ("", "null")],
)
def test_booleans_floats_lists_and_null_are_not_integers(
    tmp_path: Path, value: str, shown: str
) -> None:
    path = write(tmp_path, VALID_HEAD, f"chunking:\n  size: {value}\n")
    assert check_spec(path) == [
        f"{path}:6: chunking.size: expected integer ≥ 16 and ≤ 1048576, got {shown}"]


def test_type_message_for_nullable_bounded_number(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "models:\n  llm:\n    top_p: high\n    n_threads: x\n")
    assert check_spec(path) == [
        f'{path}:7: models.llm.top_p: expected number > 0 and ≤ 1, got "high"',
        f'{path}:8: models.llm.n_threads: expected integer ≥ 1 and ≤ 1024 or null, got "x"',
    ]


def test_mapping_expected(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "models: gemma\n")
    assert check_spec(path) == [f'{path}:5: models: expected mapping, got "gemma"']


def test_unknown_enum_value_suggests_closest(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\ncorpus:\n  dataset: musiqe\n  path: x.jsonl\n")
    assert check_spec(path) == [
        (
            f"{path}:3: corpus.dataset: expected one of musique, hotpotqa, 2wiki, holisqa, kgqa, jsonl, text, "
            "documents; "
            "got 'musiqe' (did you mean 'musique'?)"
        )
    ]


def test_missing_required_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\ncorpus:\n  dataset: text\n")
    assert check_spec(path) == [f"{path}:2: corpus: missing required key 'path'"]
    bare = write(tmp_path, "description: nothing else\n", name="bare.yaml")
    assert check_spec(bare) == [
        f"{bare}:1: (top level): missing required key 'corpus'",
        f"{bare}:1: (top level): missing required key 'name'",
    ]


@pytest.mark.parametrize(
    ("extra", "line", "message"),
    [
        ("chunking:\n  size: 8\n", 6, "chunking.size: must be ≥ 16, got 8"),
        (
            "models:\n  llm:\n    max_retries: 11\n",
            7,
            "models.llm.max_retries: must be ≤ 10, got 11",
        ),
        ("models:\n  llm:\n    top_p: 0\n", 7, "models.llm.top_p: must be > 0, got 0"),
        ("query: []\n", 5, "query: must list at least 1 item(s), got 0"),
        (
            "query:\n  - {name: q, strategy: naive, budget_tokens: [1, 2000000]}\n",
            6,
            "query[0].budget_tokens[1]: must be ≤ 1000000, got 2000000",
        ),
        (
            "evaluate:\n  metrics: [em, f1, em]\n",
            6,
            "evaluate.metrics: items must be unique; 'em' is listed more than once",
        ),
        (
            "evaluate:\n  metrics: [accuracy]\n",
            6,
            (
                "evaluate.metrics[0]: 'accuracy' does not match the required pattern "
                "^(em|f1|citation_precision|citation_precision_answer|citation_recall|cited|coverage|iterations|"
                "context_recall|hit|macro_f1|micro_f1|answer_coverage|extraction|"
                "recall@[1-9][0-9]{0,3}|hit@[1-9][0-9]{0,3})$"
            ),
        ),
    ],
)
def test_bounds_pattern_and_list_rules_in_plain_words(
    tmp_path: Path, extra: str, line: int, message: str
) -> None:
    path = write(tmp_path, VALID_HEAD, extra)
    assert check_spec(path) == [f"{path}:{line}: {message}"]


def test_empty_path_and_bad_name(tmp_path: Path) -> None:
    path = write(tmp_path, "name: my run\ncorpus:\n  dataset: text\n  path: ''\n")
    assert check_spec(path) == [
        (
            f"{path}:1: name: 'my run' does not match the required pattern "
            "^[A-Za-z0-9][A-Za-z0-9_.-]*$"
        ),
        f"{path}:4: corpus.path: must not be empty",
    ]


def test_python_tag_is_rejected_and_never_executed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    calls: list[str] = []
    monkeypatch.setattr(os, "system", calls.append)
    path = write(
        tmp_path,
        f"""\
        name: demo
        corpus:
          dataset: text
          path: !!python/object/apply:os.system ["touch {marker}"]
        """,
    )
    messages = check_spec(path)
    assert len(messages) == 1
    assert messages[0].startswith(f"{path}:4: corpus.path: ")
    assert "tags like !!python/object are not allowed" in messages[0]
    with pytest.raises(KgragError, match="tags like !!python/object are not allowed"):
        load_spec(path)
    assert calls == []
    assert not marker.exists()


def test_custom_tags_and_python_tagged_keys_are_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "description: !secret abc\n!!python/name:os.system : 1\n")
    messages = check_spec(path)
    assert [m.split(": ")[0] for m in messages] == [f"{path}:5", f"{path}:6"]
    assert all("tags like !!python/object are not allowed" in m for m in messages)
    assert "(found !secret)" in messages[0]


def test_yaml_syntax_error_reports_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\ncorpus:\n  dataset: text\n path: x\n")
    [message] = check_spec(path)
    assert message.startswith(f"{path}:4: YAML syntax error: ")


def test_unclosed_bracket_reported_within_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\ncorpus: [text\n")
    [message] = check_spec(path)
    assert message.startswith(f"{path}:2: YAML syntax error: ")


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "chunking:\n  size: 128\n  size: 64\n")
    assert check_spec(path) == [
        (
            f"{path}:7: chunking: duplicate key 'size' (first at line 6); "
            "YAML would silently keep only the last one"
        )
    ]


def test_duplicate_strategy_names_are_errors(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        VALID_HEAD,
        """\
        query:
          - name: dense
            strategy: naive
          - name: dense
            strategy: naive
            budget_tokens: 500
        """,
    )
    assert check_spec(path) == [
        (
            f"{path}:8: query[1].name: duplicate strategy name 'dense' "
            "(also used by query[0].name at line 6); strategy names must be unique"
        )
    ]


def test_overlap_must_be_smaller_than_chunk_size(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "chunking:\n  size: 16\n")
    assert check_spec(path) == [
        (
            f"{path}:6: chunking.overlap: must be smaller than chunking.size (16), got 32; "
            "chunks would never advance"
        )
    ]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert check_spec(path) == [
        f"{path}:1: the spec file is empty; it needs at least 'name' and 'corpus'"
    ]


@pytest.mark.parametrize(
    ("text", "kind"),
    [("- name: demo\n", "a list"), ("just words\n", 'a single value ("just words")')],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = write(tmp_path, text)
    assert check_spec(path) == [
        f"{path}:1: (top level): the spec must be a mapping of keys, got {kind}"
    ]


def test_non_string_keys_are_unknown_keys(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "chunking:\n  size: 64\n  1: x\n")
    assert check_spec(path) == [
        f"{path}:7: chunking: unknown key 1; allowed keys here: size, overlap, title"
    ]


def test_value_that_cannot_be_built_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "chunking:\n  size: !!int lots\n")
    [message] = check_spec(path)
    assert message.startswith(f"{path}: a value could not be read: ")


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"]
    for level in range(1, 7):
        aliases = ", ".join([f"*l{level - 1}"] * 10)
        levels.append(f"l{level}: &l{level} [{aliases}]\n")
    path = write(tmp_path, VALID_HEAD, *levels)
    [message] = check_spec(path)
    assert message.startswith(f"{path}: the spec expands to more than 100000 values")


def test_missing_file_and_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert check_spec(missing) == [f"{missing}: spec file not found"]
    with pytest.raises(KgragError, match="spec file not found"):
        load_spec(missing)
    assert check_spec(tmp_path) == [f"{tmp_path}: is a folder, not a spec file"]


def test_several_documents_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "---\n" + VALID_HEAD)
    [message] = check_spec(path)
    assert message.startswith(f"{path}:5: YAML syntax error: ")


def test_self_referencing_anchor_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "description: &loop [*loop]\n")
    [message] = check_spec(path)
    assert message.startswith(f"{path}: the spec")


def test_all_errors_reported_together_sorted_by_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: demo
        modles: {}
        corpus:
          dataset: musiqe
          path: data.jsonl
        query:
          - name: a
            strategy: naive
            budget_tokens: lots
        chunking:
          size: 8
        """,
    )
    assert check_spec(path) == [
        f"{path}:2: (top level): unknown key 'modles'; did you mean 'models'?",
        (
            f"{path}:4: corpus.dataset: expected one of musique, hotpotqa, 2wiki, holisqa, kgqa, jsonl, text, "
            "documents; "
            "got 'musiqe' (did you mean 'musique'?)"
        ),
        f'{path}:9: query[0].budget_tokens: expected integer ≥ 1 and ≤ 1000000 or a list of them (a sweep), got "lots"',
        f"{path}:11: chunking.size: must be ≥ 16, got 8",
    ]
    with pytest.raises(KgragError) as raised:
        load_spec(path)
    assert str(raised.value) == "\n".join(check_spec(path))


def test_merge_keys_work_and_own_keys_win(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        VALID_HEAD,
        """\
        query:
          - &base
            name: small
            strategy: naive
            budget_tokens: 500
          - <<: *base
            name: large
            budget_tokens: many
        """,
    )
    assert check_spec(path) == [
        f'{path}:12: query[1].budget_tokens: expected integer ≥ 1 and ≤ 1000000 or a list of them (a sweep), got "many"'
    ]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (b"name: demo\ncaf\xe9: 1\n", 2, "not UTF-8 text (byte 0xe9 at offset 14)"),
        (b"name: demo\ndescription: caf\xe9\n", 2, "not UTF-8 text (byte 0xe9 at offset 27)"),
        (b"\xff\xfename: demo\n", 1, "not UTF-8 text (byte 0xff at offset 0)"),
        (
            b"name: demo\ndescription: a\x00b\n",
            2,
            "not plain text (byte 0x00 at offset 25); a spec may hold no control characters",
        ),
        (
            "name: demo\ndescription: \ufffe\n".encode(),
            2,
            (
                "not plain text (character U+FFFE at offset 24); "
                "a spec may hold no control characters"
            ),
        ),
    ],
)
def test_bytes_that_are_not_text_are_named_with_their_offset(
    tmp_path: Path, text: bytes, line: int, problem: str
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(text)
    assert check_spec(path) == [f"{path}:{line}: {problem}"]
    with pytest.raises(KgragError, match="at offset"):
        load_spec(path)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "models:\n  llm:\n    temperature: .nan\n",
            "models.llm.temperature: must be a finite number, got .nan",
        ),
        (
            "models:\n  llm:\n    temperature: .inf\n",
            "models.llm.temperature: must be a finite number, got .inf",
        ),
        (
            "models:\n  llm:\n    top_p: .nan\n",
            "models.llm.top_p: must be a finite number, got .nan",
        ),
        (
            "models:\n  llm:\n    temperature: 1.0e+400\n",
            "models.llm.temperature: must be a finite number, got .inf",
        ),
        (
            f"models:\n  llm:\n    temperature: {10**400}\n",
            (
                "models.llm.temperature: is too large for a number "
                f"(the limit is about 1.8e308), got {str(10**400)[:59]}…"
            ),
        ),
        (
            "graphs:\n  - {name: h, kind: hierarchy, gate_min_similarity: -.inf}\n",
            "graphs[0].gate_min_similarity: must be a finite number, got -.inf",
        ),
        (
            "graphs:\n  - {name: s, kind: skeleton, beta: [0.5, .nan]}\n",
            "graphs[0].beta[1]: must be a finite number, got .nan",
        ),
        (
            "query:\n  - {name: q, strategy: naive, budget_tokens: .inf}\n",
            (
                "query[0].budget_tokens: expected integer ≥ 1 and ≤ 1000000 "
                "or a list of them (a sweep), got .inf"
            ),
        ),
        (  # an int past the largest float would pass every bound
            f"query:\n  - {{name: q, strategy: naive, budget_tokens: [{10**400}, 4000]}}\n",
            (
                "query[0].budget_tokens[0]: is too large for a number "
                f"(the limit is about 1.8e308), got {str(10**400)[:59]}…"
            ),
        ),
        (
            f"models:\n  llm:\n    n_threads: {10**400}\n",
            (
                "models.llm.n_threads: is too large for a number "
                f"(the limit is about 1.8e308), got {str(10**400)[:59]}…"
            ),
        ),
    ],
)
def test_non_finite_numbers_are_refused_wherever_a_number_is_allowed(
    tmp_path: Path, extra: str, message: str
) -> None:
    path = write(tmp_path, VALID_HEAD, extra)
    line = 4 + extra.count("\n")  # the last line of the extra part
    assert check_spec(path) == [f"{path}:{line}: {message}"]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            VALID_HEAD.replace("demo", "n" * 300),
            1,
            "name: must be at most 64 characters long, got 300",
        ),
        (
            VALID_HEAD.replace("demo", "n" * 5_000_000),
            1,
            "name: must be at most 64 characters long, got 5000000",
        ),
        (
            VALID_HEAD + f"query:\n  - {{name: {'q' * 65}, strategy: naive}}\n",
            6,
            "query[0].name: must be at most 64 characters long, got 65",
        ),
        (
            VALID_HEAD + f"graphs:\n  - {{name: {'g' * 65}, kind: bipartite}}\n",
            6,
            "graphs[0].name: must be at most 64 characters long, got 65",
        ),
    ],
    ids=["run-300", "run-5MB", "strategy", "graph"],
)
def test_names_that_become_folder_names_are_capped(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, text)
    assert check_spec(path) == [f"{path}:{line}: {message}"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "query:\n  - {name: q, strategy: naive, budget_tokens: [1000, 1000]}\n",
            "query[0].budget_tokens: a sweep runs each value once; 1000 is listed more than once",
        ),
        (
            "query:\n  - {name: q, strategy: ket, theta: [0, 1, 1.0]}\n",
            "query[0].theta: a sweep runs each value once; 1.0 is listed more than once",
        ),
        (
            "graphs:\n  - {name: s, kind: skeleton, beta: [0.2, 0.8, 0.2]}\n",
            "graphs[0].beta: a sweep runs each value once; 0.2 is listed more than once",
        ),
        (
            "graphs:\n  - {name: s, kind: skeleton, knn_k: [4, 4]}\n",
            "graphs[0].knn_k: a sweep runs each value once; 4 is listed more than once",
        ),
        (
            "graphs:\n  - {name: b, kind: bipartite, tau: [1, 1]}\n",
            "graphs[0].tau: a sweep runs each value once; 1 is listed more than once",
        ),
    ],
    ids=["budget_tokens", "theta", "beta", "knn_k", "tau"],
)
def test_a_sweep_may_not_repeat_a_value(tmp_path: Path, extra: str, message: str) -> None:
    path = write(tmp_path, VALID_HEAD, extra)
    assert check_spec(path) == [f"{path}:6: {message}"]


def test_a_nul_character_written_as_an_escape_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, 'description: "a\\0b"\noutputs: "\\x00"\n')
    assert check_spec(path) == [
        f"{path}:5: description: must not contain a NUL character (\\0)",
        f"{path}:6: outputs: must not contain a NUL character (\\0)",
    ]


@pytest.mark.parametrize(
    ("extra", "line", "where", "value"),
    [
        ("", 1, "name", '"demo\\n"'),
        ("query:\n  - {name: \"dense-1k\\n\", strategy: naive}\n", 6, "query[0].name",
         '"dense-1k\\n"'),
        ("graphs:\n  - {name: \"g\\n\", kind: bipartite}\n", 6, "graphs[0].name", '"g\\n"'),
        ("training:\n  - {name: \"t\\n\", method: ark}\n", 6, "training[0].name", '"t\\n"'),
        ("evaluate: {metrics: [\"em\\n\"]}\n", 5, "evaluate.metrics[0]", '"em\\n"'),
    ],
    ids=["run", "strategy", "graph", "training", "metric"],
)
def test_a_name_ending_in_a_line_break_is_refused(
    tmp_path: Path, extra: str, line: int, where: str, value: str
) -> None:
    """A name becomes a folder and a results row: a pattern's ``$`` is the end of the text."""
    head = VALID_HEAD.replace("name: demo", 'name: "demo\\n"') if where == "name" else VALID_HEAD
    path = write(tmp_path, head, extra)
    messages = check_spec(path)
    assert len(messages) == 1 and "\n" not in messages[0]
    assert messages[0].startswith(f"{path}:{line}: {where}: {value} does not match the "
                                  "required pattern ^")


def test_a_thread_count_is_bounded(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "models:\n  llm: {n_threads: 1000000}\n")
    assert check_spec(path) == [f"{path}:6: models.llm.n_threads: must be ≤ 1024, got 1000000"]


@pytest.mark.parametrize("value", ["0400", "4:16", "-010", "1:30.5", "0b100000000", "1_024",
                                   "+0b1_0", "0x1_0", "1_0.5", "1.5_0"])
def test_numbers_yaml_versions_read_differently_are_refused(tmp_path: Path, value: str) -> None:
    """YAML 1.1 reads 0400 as octal, 4:16 as base 60, 0b100000000 as binary (all 256) and
    1_024 as 1024; YAML 1.2 reads the first as 400 and the others as text."""
    path = write(tmp_path, VALID_HEAD, f"chunking: {{size: {value}}}\n")
    assert check_spec(path) == [(
        f'{path}:5: chunking.size: expected integer ≥ 16 and ≤ 1048576, got "{value}": YAML '
        "versions disagree on a leading 0 (octal), on colons (base 60), on 0b (binary) and on "
        "underscores; write the number in plain decimal")]


@pytest.mark.parametrize("value", ["yes", "No", "ON", "off"])
def test_booleans_yaml_versions_read_differently_are_refused(tmp_path: Path, value: str) -> None:
    """YAML 1.1 reads yes / no / on / off as booleans; YAML 1.2 reads them as text."""
    path = write(tmp_path, VALID_HEAD, f"chunking: {{title: {value}}}\n")
    assert check_spec(path) == [(
        f'{path}:5: chunking.title: expected boolean, got "{value}": YAML versions disagree on '
        "yes, no, on and off (booleans to YAML 1.1, text to YAML 1.2); write true or false")]


@pytest.mark.parametrize("value, number", [("1e-5", 1e-5), ("2.5E-3", 2.5e-3), (".5e-2", 0.005),
                                           ("+1e-1", 0.1)])
def test_an_exponent_without_a_point_is_a_float_as_yaml_1_2_reads_it(tmp_path: Path, value: str,
                                                                    number: float) -> None:
    """YAML 1.1 (PyYAML) reads 1e-5 as text, so a spec's push_epsilon: 1e-5 was refused
    with "expected number"; YAML 1.2 and every editor read a float."""
    path = write(tmp_path, VALID_HEAD, "query:\n  - {name: ppr, strategy: ppr, entities: kg, "
                 f"walk: push, push_epsilon: {value}}}\n"
                 "extraction: {method: nlp}\ngraphs:\n  - {name: kg, kind: entities}\n")
    assert check_spec(path) == []
    assert load_spec(path).data["query"][0]["push_epsilon"] == pytest.approx(number)


def test_such_numbers_are_text_where_text_belongs(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD, "description: 0400\nchunking: {size: 400}\n")
    spec = load_spec(path)
    assert spec.data["description"] == "0400" and spec.chunking["size"] == 400
    for value in ("1_024", "0b11", "yes", "off"):
        path = write(tmp_path, VALID_HEAD, f"description: {value}\nchunking: {{title: false}}\n")
        spec = load_spec(path)
        assert spec.data["description"] == value and spec.chunking["title"] is False


def integer_schemas(node: object, path: str = "") -> list[tuple[str, dict]]:
    """Every schema in ``node`` that admits an integer, with where it sits."""
    found = []
    if isinstance(node, dict):
        types = node.get("type")
        if "integer" in (types if isinstance(types, list) else [types]):
            found.append((path, node))
        for key, value in node.items():
            found.extend(integer_schemas(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(integer_schemas(value, f"{path}/{index}"))
    return found


def test_every_integer_of_the_schema_has_a_maximum() -> None:
    """A value past what a run can use (an extra zero, 2**64) is refused at validate, not
    passed to a 32-bit C argument or an allocation deep in a run."""
    from kgrag.spec.schema import SCHEMA

    found = integer_schemas(SCHEMA)
    assert len(found) > 80
    assert [path for path, schema in found if "maximum" not in schema and "enum" not in schema
            ] == []


@pytest.mark.parametrize(("extra", "line", "message"), [
    ("chunking: {size: 100000000000000000000000000000}\n", 5,
     "chunking.size: must be ≤ 1048576, got 100000000000000000000000000000"),
    ("models:\n  llm: {seed: 18446744073709551616}\n", 6,
     "models.llm.seed: must be ≤ 2147483647, got 18446744073709551616"),
    ("models:\n  llm: {n_ctx: 99999999999}\n", 6,
     "models.llm.n_ctx: must be ≤ 1048576, got 99999999999"),
    ("answer: {max_tokens: 10000000000}\n", 5,
     "answer.max_tokens: must be ≤ 1048576, got 10000000000"),
    ("answer: {questions: 100000000000000000000}\n", 5,
     "answer.questions: must be ≤ 1000000000, got 100000000000000000000"),
    ("query:\n  - {name: d, strategy: naive, top_k: 1000000}\n", 6,
     "query[0].top_k: must be ≤ 100000, got 1000000"),
    ("graphs:\n  - {name: s, kind: skeleton, seed: 4294967296}\n", 6,
     "graphs[0].seed: must be ≤ 2147483647, got 4294967296"),
], ids=["chunk-size", "seed", "n_ctx", "max_tokens", "answered", "top_k", "graph-seed"])
def test_numbers_past_what_a_run_can_use_are_refused(tmp_path: Path, extra: str, line: int,
                                                     message: str) -> None:
    path = write(tmp_path, VALID_HEAD, extra)
    assert check_spec(path) == [f"{path}:{line}: {message}"]


def test_a_corpus_limit_past_what_a_run_can_use_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_HEAD + "  limit: 100000000000000000000\n")
    assert check_spec(path) == [
        f"{path}:5: corpus.limit: must be ≤ 1000000000, got 100000000000000000000"]


@pytest.mark.parametrize(("metric", "valid"), [
    ("recall@9999", True), ("hit@1", True), ("recall@10000", False),
    ("recall@99999999999999999999", False), ("hit@0", False)])
def test_a_metric_cut_off_is_bounded(tmp_path: Path, metric: str, valid: bool) -> None:
    path = write(tmp_path, VALID_HEAD, f"evaluate: {{metrics: [{metric}]}}\n")
    problems = check_spec(path)
    assert problems == [] if valid else (
        len(problems) == 1
        and problems[0].startswith(f"{path}:5: evaluate.metrics[0]: '{metric}' does not match"))


@pytest.mark.parametrize("query, answer, line, message", [
    ("  - {name: t, strategy: triple_cosine}\n", "{cite: true}", 6,
     ("query[0].strategy: answer.cite: strategy triple_cosine ('t') retrieves triples, not "
      "chunks, so its answers cannot cite parts of a context or come from one")),
    ("  - {name: d, strategy: naive}\n", "{mode: extractive, length: long}", 7,
     ("answer.mode: an extractive answer is a span of the context: it needs answer.length "
      "short, not long")),
])
def test_answers_that_need_a_context_of_chunks_are_refused_by_validate(
        tmp_path: Path, query: str, answer: str, line: int, message: str) -> None:
    path = write(tmp_path, VALID_HEAD, "query:\n", query, f"answer: {answer}\n")
    problems = check_spec(path)
    assert len(problems) == 1 and problems[0].startswith(f"{path}:{line}: {message}")


@pytest.mark.parametrize(("extra", "line", "where", "shown"), [
    ("", 4, "corpus.path", '"\\n"'),
    ("extraction: {model: \"a\\nb\"}\n", 5, "extraction.model", '"a\\nb"'),
    ("models:\n  llm: {model: \"x\\ty.gguf\"}\n", 6, "models.llm.model", '"x\\ty.gguf"'),
    ("models:\n  embedder: {model: \"e\\rm\"}\n", 6, "models.embedder.model", '"e\\rm"'),
    ("cache: {dir: \"c\\u2028d\"}\n", 5, "cache.dir", '"c\\u2028d"'),
    ("outputs: \"o\\eu\"\n", 5, "outputs", '"o\\u001bu"'),
    ("query:\n  - {name: d, strategy: naive, embedder: \"m\\n\"}\n", 6, "query[0].embedder",
     '"m\\n"'),
    ("training:\n  - {name: t, method: ark, base: \"b\\n\"}\n", 6, "training[0].base", '"b\\n"'),
], ids=["corpus-path", "extraction-model", "llm", "embedder", "cache", "outputs", "strategy",
        "training"])
def test_a_control_character_in_a_path_or_model_name_is_refused(
        tmp_path: Path, extra: str, line: int, where: str, shown: str) -> None:
    """Was: valid, then a message split over two lines at the dry run."""
    head = VALID_HEAD.replace("data/musique.jsonl", '"\\n"') if where == "corpus.path" else VALID_HEAD
    path = write(tmp_path, head, extra)
    assert check_spec(path) == [
        (f"{path}:{line}: {where}: must not hold a control character (a line break, a tab…) "
        f"in a path or a model name, got {shown}")]


def test_a_served_model_missing_a_key_says_which(tmp_path: Path) -> None:
    """Was: "... is not valid under any of the given schemas"."""
    path = write(tmp_path, VALID_HEAD, "extraction: {model: {server: 'http://h', model: m}}\n")
    assert check_spec(path) == [f"{path}:5: extraction.model: missing required key 'identity'"]
