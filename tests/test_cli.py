"""The command line: one clear message and exit code 2 on bad input, no traceback, and
no library's debug lines without --verbose."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kgrag.cli import main
from tests.conftest import write_spec


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_validate_ok_and_typo(project, capsys):
    good = write_spec(project)
    bad = project / "specs" / "bad.yaml"
    bad.write_text("name: bad\ncorpus: {dataset: musique, path: x.jsonl}\nchunkng: {size: 3}\n")
    code, out, err = run_cli(capsys, "validate", str(good), str(bad))
    assert code == 2
    assert "tiny.yaml: ok" in out
    assert "bad.yaml:3:" in err and "did you mean 'chunking'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("sections, message", [
    ({"corpus": {"dataset": "musique", "path": "../missing.jsonl"}}, "does not exist"),
    ({"models": {"llm": {"model": "llama-70b"}}}, "unknown LLM 'llama-70b'"),
    ({"models": {"llm": {"model": "../nothing.gguf"}}}, "not an existing .gguf file"),
    ({"outputs": "../../elsewhere"}, "escapes the project"),
    ({"corpus": {"dataset": "musique", "path": "c" * 300}},
     "corpus path cannot be read: File name too long"),
    ({"models": {"llm": {"model": "m" * 300}}}, "not an existing .gguf file"),
    ({"models": {"embedder": {"model": "m" * 300}}}, "not a sentence-transformers model folder"),
    ({"extraction": {"model": "~nobody-here/m.gguf"}},
     "'~nobody-here/m.gguf': cannot find the home folder '~' refers to"),
    ({"corpus": {"dataset": "musique", "path": "~nobody-here/c.jsonl"}},
     "'~nobody-here/c.jsonl': cannot find the home folder '~' refers to"),
    ({"outputs": "out\0put"}, "outputs: must not contain a NUL character"),
    ({"corpus": {"dataset": "musique", "path": "\0"}}, "corpus.path: must not contain a NUL"),
])
def test_run_bad_input_exits_2_with_one_message(project, capsys, sections, message):
    spec = write_spec(project, **sections)
    code, _, err = run_cli(capsys, "run", str(spec), "--dry-run")
    assert code == 2
    assert message in err and err.startswith("kgrag: error:")
    assert "Traceback" not in err


def test_empty_corpus_exits_2(project, capsys):
    (project / "empty.jsonl").write_text("")
    spec = write_spec(project, corpus={"dataset": "musique", "path": "../empty.jsonl"})
    code, _, err = run_cli(capsys, "run", str(spec))
    assert code == 2 and "empty" in err


def test_python_tags_are_refused(project, capsys, tmp_path):
    marker = tmp_path / "pwned"
    spec = project / "specs" / "evil.yaml"
    spec.write_text(f'name: evil\ncorpus: !!python/object/apply:os.system ["touch {marker}"]\n')
    code, _, err = run_cli(capsys, "run", str(spec))
    assert code == 2 and "!!python" in err
    assert not marker.exists()


def test_dry_run_prints_the_plan_with_llm_bounds(project, capsys):
    spec = write_spec(project, answer={"questions": 2})
    code, out, _ = run_cli(capsys, "run", str(spec), "--dry-run")
    assert code == 0
    assert "answer.dense" in out and "llm calls ≤2" in out
    assert "at most 2 LLM calls" in out
    assert not (project / "outputs" / "tiny").exists()


def test_cache_stats_and_clear(capsys, isolated_cache):
    from kgrag.models.cache import CallCache

    cache = CallCache(isolated_cache)
    cache.set("llm:abc", {"text": "x"})
    cache.close()
    code, out, _ = run_cli(capsys, "cache", "stats")
    assert code == 0 and "entries: 1" in out
    code, out, _ = run_cli(capsys, "cache", "clear")
    assert code == 0
    assert "entries: 0" in run_cli(capsys, "cache", "stats")[1]


def test_models_lists_bundled_models_with_hashes(capsys):
    code, out, _ = run_cli(capsys, "models")
    assert code == 0
    lines = out.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["gemma3-270m", "smollm2-135m",
                                                   "all-MiniLM-L6-v2"]
    assert all(len(line.split()[2]) == 64 for line in lines)


def test_query_unknown_strategy(project, capsys):
    spec = write_spec(project)
    code, _, err = run_cli(capsys, "query", str(spec), "who?", "--strategy", "nope")
    assert code == 2 and "no query strategy 'nope'" in err and "dense" in err


def test_a_budget_too_small_for_any_chunk_exits_2_and_keeps_the_index(project, capsys):
    spec = write_spec(project, corpus={"dataset": "musique", "path": "../corpus.jsonl",
                                       "limit": 1},
                      query=[{"name": "tiny", "strategy": "naive", "budget_tokens": 3}],
                      answer={"questions": 0}, evaluate={"metrics": ["coverage"]})
    code, _, err = run_cli(capsys, "run", str(spec))
    assert code == 2 and "Traceback" not in err
    assert "retrieve.tiny: budget_tokens 3 holds nothing for any of the 1 questions" in err
    run_dir = project / "outputs" / "tiny"
    built = {p.name.rsplit("-", 1)[0] for p in run_dir.iterdir() if p.is_dir()}
    assert built == {"corpus", "chunks", "dense"}  # completed steps stay for the next run


@pytest.mark.parametrize("text, problem", [
    (b"name: bad\ncorpus: {dataset: musique, path: x.jsonl}\nk\xe9y: 1\n",
     "bad.yaml:3: not UTF-8 text (byte 0xe9 at offset 53)"),
    (b"name: bad\ncorpus: {dataset: musique, path: x.jsonl}\ndescription: a\x00b\n",
     "bad.yaml:3: not plain text (byte 0x00 at offset 66)"),
])
def test_validate_names_a_byte_that_is_not_text(project, capsys, text, problem):
    spec = project / "specs" / "bad.yaml"
    spec.write_bytes(text)
    code, _, err = run_cli(capsys, "validate", str(spec))
    assert code == 2 and problem in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    code, _, err = run_cli(capsys, "run", str(spec), "--dry-run")
    assert code == 2 and err.startswith("kgrag: error:") and problem in err


BAD_HEAD = "name: bad\ncorpus: {dataset: musique, path: ../corpus.jsonl}\n"


@pytest.mark.parametrize("text, problem", [
    (f"name: {'n' * 300}\n{BAD_HEAD[10:]}", "1: name: must be at most 64 characters long, got 300"),
    (BAD_HEAD + "models: {llm: {temperature: .nan}}\n",
     "3: models.llm.temperature: must be a finite number, got .nan"),
    (BAD_HEAD + "models: {llm: {temperature: .inf}}\n",
     "3: models.llm.temperature: must be a finite number, got .inf"),
    (BAD_HEAD + "models: {llm: {top_p: .nan}}\n",
     "3: models.llm.top_p: must be a finite number, got .nan"),
    (BAD_HEAD + "query: [{name: q, strategy: naive, budget_tokens: [1000, 1000]}]\n",
     "3: query[0].budget_tokens: a sweep runs each value once; 1000 is listed more than once"),
])
def test_a_spec_that_would_crash_run_is_refused_by_validate(project, capsys, text, problem):
    spec = project / "specs" / "bad.yaml"
    spec.write_text(text)
    code, _, err = run_cli(capsys, "validate", str(spec))
    assert (code, err) == (2, f"{spec}:{problem}\n")
    code, _, err = run_cli(capsys, "run", str(spec), "--dry-run")
    assert (code, err) == (2, f"kgrag: error: {spec}:{problem}\n")


@pytest.mark.parametrize("name, outputs, problem", [
    ("tiny", "pyproject.toml", "{root}/pyproject.toml is a file, not a folder"),
    ("tiny", "pyproject.toml/runs", "{root}/pyproject.toml is a file, not a folder"),
    ("corpus.jsonl", ".", "{root}/corpus.jsonl is a file, not a folder"),
    ("tiny", "o" * 300, f"'{'o' * 19}…' is longer than a file name may be (255 bytes)"),
    ("tiny", f"new/{'o' * 300}", f"'{'o' * 19}…' is longer than a file name may be (255 bytes)"),
])
def test_outputs_that_cannot_be_a_folder_exits_2_before_any_work(project, capsys, name, outputs,
                                                                  problem):
    spec = write_spec(project, name=name, outputs=outputs)
    root = project.resolve()
    before = sorted(root.rglob("*"))
    for argv in (["run", str(spec), "--dry-run"], ["run", str(spec)]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and err.startswith(f"kgrag: error: {spec}: cannot make the run folder ")
        assert err.endswith(f": {problem.format(root=root)}\n") and len(err.splitlines()) == 1
    assert sorted(root.rglob("*")) == before


class FixedQuerier:
    """A querier whose evidence and answer are given: what ``kgrag query`` prints of them."""

    def __init__(self, *evidence) -> None:
        self.evidence = iter(evidence)
        self.asked: list[str] = []

    def retrieve(self, question):
        self.asked.append(question)
        return next(self.evidence)

    def answer(self, evidence):
        from kgrag import api

        return api.QueryResult(evidence, "x")


def test_query_prints_why_a_strategy_chose_its_chunks(capsys, monkeypatch):
    from kgrag import api

    evidence = api.Evidence("Who?", "ppr", ["c1", "c2"], ["Paris", "Lyon"], 20, 3.0, "",
                            {"seeds": {"PARIS": 0.5}, "scores": {"c1": 0.25, "c2": 0.125}})
    monkeypatch.setattr(api, "open_query", lambda *a, **k: FixedQuerier(evidence))
    code, out, _ = run_cli(capsys, "query", "spec.yaml", "Who?")
    assert code == 0
    assert "seeds: PARIS (0.5)" in out
    assert "c1  Paris  (score 0.25)" in out and "c2  Lyon  (score 0.125)" in out
    # the evidence comes before the answer
    assert out.index("c2  Lyon") < out.index("answer: x")


def test_query_prints_nearest_name_links_and_hugrag_ppr_seeds(capsys, monkeypatch):
    from kgrag import api

    querier = FixedQuerier(
        api.Evidence("Who?", "ppr", ["c1"], ["Paris"], 10, 3.0, "",
                     {"seeds": {"PARIS": 0.5}, "nearest": {"CITY OF LIGHT": "PARIS"}}),
        api.Evidence("Who?", "hugrag", ["c1"], ["Paris"], 10, 3.0, "",
                     {"seeds": ["PARIS", "M1"], "ppr_seeds": {"PARIS": 1.0}}))
    monkeypatch.setattr(api, "open_query", lambda *a, **k: querier)
    _, out, _ = run_cli(capsys, "query", "spec.yaml", "Who?")
    assert "linked by nearest name: CITY OF LIGHT -> PARIS" in out
    code, out, _ = run_cli(capsys, "query", "spec.yaml", "Who?")
    assert code == 0 and "seeds: PARIS (1)" in out


def test_a_cited_passage_is_printed_with_the_answer_marked():
    from kgrag import api
    from kgrag.console import _marked

    text = "# Louvre\n" + "The museum opened in 1793 in Paris. " * 20
    at = text.index("1793")
    citation = api.Citation(1, "c1", "Louvre", "louvre.pdf, p. 1", text, (at, at + 4))
    shown = _marked(citation)
    assert "»1793«" in shown and "\n" not in shown and len(shown) < len(text)
    assert _marked(api.Citation(1, "c1", "", "", "short text", None)) == "short text"


def test_query_reaches_every_row_of_a_swept_strategy(project, capsys, monkeypatch):
    """The row names the results table shows answer, and an entry's name picks its first
    row; an unknown name lists the rows."""
    from kgrag import api
    from tests.standin import RuleLLM

    opened = api.open_session
    monkeypatch.setattr(api, "open_session", lambda path: opened(path, llm_backend=RuleLLM()))
    spec = write_spec(project, corpus={"dataset": "musique", "path": "../corpus.jsonl",
                                       "limit": 1},
                      query=[{"name": "dense", "strategy": "naive",
                              "budget_tokens": [300, 600]}])
    question = "Who founded the company?"
    for asked, row in [("dense@budget_tokens=600", "dense@budget_tokens=600"),
                       ("dense", "dense@budget_tokens=300"), (None, "dense@budget_tokens=300")]:
        code, out, _ = run_cli(capsys, "query", str(spec), question,
                               *(["--strategy", asked] if asked else []))
        assert code == 0
        assert out.startswith(f"strategy: {row}  (") and "answer: An answer" in out
    code, _, err = run_cli(capsys, "query", str(spec), question, "--strategy", "dense@x=1")
    assert code == 2 and err == (
        "kgrag: error: no query strategy 'dense@x=1' in tiny.yaml; choose from: "
        "dense@budget_tokens=300, dense@budget_tokens=600\n")


@pytest.mark.parametrize("corpus, problem", [
    ("loop", "'../loop': symbolic links loop back on themselves (Symlink loop from"),
    ("loop/inside.jsonl", "'../loop/inside.jsonl': symbolic links loop back on themselves"),
    ("deep.jsonl", "deep.jsonl:1: nested too deeply to read"),
])
def test_a_corpus_that_loops_or_nests_too_deeply_exits_2_with_one_line(project, capsys, corpus,
                                                                        problem):
    (project / "loop").symlink_to("loop")
    (project / "deep.jsonl").write_text('{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    spec = write_spec(project, corpus={"dataset": "musique", "path": f"../{corpus}"})
    for argv in (["run", str(spec), "--dry-run"], ["run", str(spec)]):
        if corpus == "deep.jsonl" and "--dry-run" in argv:
            continue  # a dry run reads no corpus line
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and err.startswith("kgrag: error: ") and problem in err
        assert len(err.splitlines()) == 1


def test_a_corpus_path_that_is_a_fifo_is_named_as_such(project, capsys):
    import os

    os.mkfifo(project / "fifo.jsonl")
    spec = write_spec(project, corpus={"dataset": "musique", "path": "../fifo.jsonl"})
    code, _, err = run_cli(capsys, "run", str(spec), "--dry-run")
    assert code == 2 and err == ("kgrag: error: corpus path is neither a file nor a folder "
                                 f"(a FIFO, socket or device?): {project / 'fifo.jsonl'}\n")


@pytest.mark.parametrize("argv", [("report", "no\nsuch"), ("run", "no\nsuch.yaml"),
                                  ("validate", "no\nsuch.yaml")])
def test_a_value_holding_a_line_break_keeps_the_error_on_one_line(tmp_path, capsys, argv):
    """Was: the message split where the path broke, the rest of it on a line of its own."""
    command, name = argv
    code, _, err = run_cli(capsys, command, str(tmp_path / name))
    assert code == 2 and err.count("\n") == 1 and str(tmp_path / "no\\nsuch") in err


def test_a_corpus_path_holding_a_line_break_is_refused_by_validate_and_run(project, capsys):
    spec = write_spec(project, corpus={"dataset": "jsonl", "path": "\n"})
    for command in (("validate",), ("run", "--dry-run")):
        code, _, err = run_cli(capsys, *command, str(spec))
        assert code == 2 and err.count("\n") == 1 and "corpus.path: must not hold a control " \
            'character (a line break, a tab…) in a path or a model name, got "\\n"' in err


@pytest.mark.parametrize("verbose, shown", [(False, ["WARNING: loud"]),
                                            (True, ["DEBUG: quiet", "WARNING: loud"])])
def test_a_library_logger_at_debug_prints_only_with_verbose(verbose, shown):
    code = ("import logging; from kgrag.cli import configure_logging; "
            f"configure_logging({verbose}); lib = logging.getLogger('lib'); "
            "lib.setLevel(logging.DEBUG); lib.debug('quiet'); lib.warning('loud')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stderr.splitlines() == [f"kgrag: {line}" for line in shown]
