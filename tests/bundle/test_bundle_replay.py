"""Bundle a finished run, replay it in a fresh folder with an empty cache: no model call,
the same metrics; and every way a bundle or a replay can go wrong, one message each."""

from __future__ import annotations

import errno
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from kgrag import api, models
from kgrag.bundle.archive import INDEX, read_archive, write_archive
from kgrag.bundle.compare import metric_differences
from kgrag.cli import main
from kgrag.errors import KgragError
from kgrag.models import llamacpp
from kgrag.models.embed import embedder as embed
from kgrag.models.registry import ResolvedModel, resolve_embedder
from kgrag.pipeline.artefacts import CALLS_RECORD
from kgrag.pipeline.integrity import write_listing
from tests.conftest import SHARED_DATA, make_project, write_spec
from tests.standin import RuleLLM, run_with

SECTIONS = {"corpus": {"dataset": "musique", "path": "../corpus.jsonl", "limit": 2},
            "query": [{"name": "dense", "strategy": "naive", "budget_tokens": 300}],
            "answer": {"questions": 2}}


def bundled_run(project: Path, tmp_path: Path, *flags: str,
                monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[Path, Path]:
    """Run the spec with the stand-in LLM and bundle it; with ``monkeypatch``, then move to
    "another machine": an empty default cache, and models that must never run."""
    spec = write_spec(project, **SECTIONS)
    run_with(spec, RuleLLM())
    bundle = tmp_path / "tiny.tar.gz"
    assert main(["bundle", str(spec), "-o", str(bundle), *flags]) == 0
    if monkeypatch is not None:
        def refuse(*args, **kwargs):
            raise AssertionError("a model was called during the replay")

        monkeypatch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "other-machine-cache"))
        monkeypatch.setattr(llamacpp.LlamaCppBackend, "generate", refuse)
        monkeypatch.setattr(llamacpp.LlamaCppBackend, "logprobs", refuse)
        monkeypatch.setattr(embed.SentenceTransformerBackend, "encode", refuse)
    return spec, bundle


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what came before (the original run) is not this command's
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_replay_makes_no_model_call_and_reproduces_the_metrics(project, tmp_path, capsys,
                                                                  monkeypatch):
    spec, bundle = bundled_run(project, tmp_path, monkeypatch=monkeypatch)
    bundled = json.loads((project / "outputs" / "tiny" / "metrics.json").read_text())
    folder = tmp_path / "elsewhere"
    code, out, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder))
    assert (code, err) == (0, "")
    assert f"replayed in {folder}: 0 model calls;" in out
    assert "metrics.json: identical to the bundle's apart from timings" in out
    replayed = json.loads((folder / "project/outputs/tiny/metrics.json").read_text())
    assert replayed["rows"][0]["llm_calls"] == 2 and replayed["rows"][0]["coverage"] is not None
    assert metric_differences(bundled, replayed) == []
    assert (folder / "project/specs/tiny.yaml").read_bytes() == spec.read_bytes()
    assert (folder / "project/corpus.jsonl").read_bytes() == (project / "corpus.jsonl").read_bytes()
    manifest = json.loads((folder / "project/outputs/tiny/manifest.json").read_text())
    assert all(step["status"] == "ran" and step["llm"]["calls"] == step["embed"]["calls"] == 0
               for step in manifest["steps"])
    assert sum(step["llm"]["cache_hits"] for step in manifest["steps"]) == 2  # the answers
    assert not (tmp_path / "other-machine-cache").exists()  # the replay's cache is its own
    # the same folder again: the replay resumes, every step reused
    assert all(step["status"] == "reused" for step in api.replay(bundle, folder).manifest.steps)


def test_the_bundle_holds_exactly_the_entries_the_steps_used(project, tmp_path):
    _, bundle = bundled_run(project, tmp_path)
    used = set()
    for artefact in (project / "outputs" / "tiny").glob("*-*"):
        used |= set(json.loads((artefact / CALLS_RECORD).read_text()))
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        lines = tar.extractfile("calls.jsonl").read().decode().splitlines()
        index = json.loads(tar.extractfile(INDEX).read())
    assert names[0] == INDEX and names[-1] == "bundle.sha256"
    assert {json.loads(line)[0] for line in lines} == used and len(lines) == index["calls"]
    assert {key.split(":")[0] for key in used} == {"llm", "embed"}
    assert {"project/specs/tiny.yaml", "project/corpus.jsonl", "manifest.json",
            "metrics.json"} <= set(names)
    assert set(index["models"]) == {"llm", "embedder"}  # the models its steps used
    assert index["libraries"]["kgrag"] and index["steps"]["evaluate"]


def rewrite(bundle: Path, change) -> None:
    """Rewrite a bundle's tar, passing each (name, bytes) through ``change``."""
    with tarfile.open(bundle) as tar:
        members = [(info.name, tar.extractfile(info).read()) for info in tar]
    with tarfile.open(bundle, "w:gz") as tar:
        for name, data in members:
            data = change(name, data)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_damage_at_the_end_of_the_archive_is_found(tmp_path):
    """Past the tar's end marker lie the tar's padding and gzip's trailer (CRC-32 and
    length, the last 8 bytes): damage there leaves every member intact, so only the gzip
    stream's own check, read to its end, can tell."""
    bundle = tmp_path / "b.tar.gz"
    write_archive(bundle, {}, {"calls.jsonl": b"[1, 2]\n" * 100})
    whole = bundle.read_bytes()
    assert read_archive(bundle)[1]["calls.jsonl"] == b"[1, 2]\n" * 100
    spoiled = [whole[:-cut] for cut in range(1, 9)]
    for at in range(-8, 0):
        data = bytearray(whole)
        data[at] ^= 0x01
        spoiled.append(bytes(data))
    for data in spoiled:
        bundle.write_bytes(data)
        with pytest.raises(KgragError, match="is truncated or damaged"):
            read_archive(bundle)


@pytest.mark.parametrize("spoil, message", [
    (lambda b: b.write_bytes(b.read_bytes()[: len(b.read_bytes()) // 2]),
     "is truncated or damaged"),
    (lambda b: rewrite(b, lambda n, d: d.replace(b"a", b"e", 1)
                       if n == "project/corpus.jsonl" else d),
     "is damaged or was altered: project/corpus.jsonl does not match its checksum"),
    (lambda b: rewrite(b, lambda n, d: d.replace(b'"calls"', b'"Calls"') if n == INDEX else d),
     "is damaged or was altered: bundle.json does not match its checksum"),
    (lambda b: b.write_bytes(b"not a bundle"), "is truncated or damaged"),
    (lambda b: b.write_bytes(b.read_bytes()[:-1]), "is truncated or damaged"),
    (lambda b: flip(b, -8), "is truncated or damaged"),  # the gzip trailer's CRC-32
])
def test_a_damaged_or_altered_bundle_exits_2_with_one_message(project, tmp_path, capsys,
                                                                spoil, message):
    _, bundle = bundled_run(project, tmp_path)
    spoil(bundle)
    folder = tmp_path / "replay"
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder))
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not folder.exists()  # nothing was unpacked


def test_a_model_that_differs_or_is_missing_is_named(project, tmp_path, capsys, monkeypatch):
    _, bundle = bundled_run(project, tmp_path, monkeypatch=monkeypatch)
    made_with = api.open_session(project / "specs/tiny.yaml").models.model("answerer").sha256

    def other_gemma(entry, base=None, where="models.llm"):
        return ResolvedModel(entry["model"], "llm", Path("/models/gemma.gguf"), "f" * 64, True)

    def no_embedder(name, base=None):
        raise KgragError(f"unknown embedder {name!r}")

    monkeypatch.setattr(models, "resolve_llm_entry", other_gemma)  # what ``Models`` asks
    monkeypatch.setattr(models, "resolve_embedder", no_embedder)
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(tmp_path / "r"))
    assert code == 2 and len(err.splitlines()) == 1
    assert ("model gemma3-270m (llm) differs: the bundle was made with sha256 "
            f"{made_with[:16]}…, /models/gemma.gguf has {'f' * 16}…") in err
    assert "model all-MiniLM-L6-v2 (embedder, sha256 " in err and "is missing here" in err


def test_a_bundle_without_its_corpus_replays_once_given_it(project, tmp_path, capsys,
                                                          monkeypatch):
    _, bundle = bundled_run(project, tmp_path, "--no-corpus", monkeypatch=monkeypatch)
    with tarfile.open(bundle) as tar:
        assert "project/corpus.jsonl" not in tar.getnames()
    folder = tmp_path / "replay"
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder))
    assert code == 2 and "corpus.path is not in the bundle (made with --no-corpus): give the " \
                         "file of sha256 " in err
    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # a --corpus path in a symbolic-link loop: one error, no traceback
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder),
                           "--corpus", str(loop))
    assert code == 2 and "symbolic links loop back on themselves" in err
    code, out, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder),
                             "--corpus", str(project / "corpus.jsonl"))
    assert code == 0 and "0 model calls" in out


def test_bundling_needs_a_finished_run_whose_steps_recorded_their_calls(project, tmp_path,
                                                                         capsys):
    spec = write_spec(project, **SECTIONS)
    code, _, err = run_cli(capsys, "bundle", str(spec), "-o", str(tmp_path / "b.tar.gz"))
    assert code == 2 and "step corpus has not been built" in err and "kgrag run" in err
    run_with(spec, RuleLLM())
    for artefact in (project / "outputs" / "tiny").glob("chunks-*"):
        (artefact / CALLS_RECORD).unlink()  # as built before steps recorded their calls
        write_listing(artefact)
    code, _, err = run_cli(capsys, "bundle", str(spec), "-o", str(tmp_path / "b.tar.gz"))
    assert code == 2 and "step(s) chunks were built before" in err and "--force corpus" in err
    assert not (tmp_path / "b.tar.gz").exists()


def test_a_folder_holding_something_else_is_refused(project, tmp_path, capsys):
    _, bundle = bundled_run(project, tmp_path)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(tmp_path / "busy"))
    assert code == 2 and "is not empty and holds no replay of this bundle" in err


def test_only_timings_and_paid_calls_may_differ():
    row = {"strategy": "dense", "f1": 0.5, "retrieval_ms_p50": 3.0}
    build = {"graph": "kg", "entities": 9, "llm_calls": 5, "cache_hits": 0, "wall_s": 40.0}
    bundled = {"dataset": "musique", "n_questions": 2, "rows": [row], "builds": [build]}
    replayed = {**bundled, "rows": [{**row, "retrieval_ms_p50": 4.1}],
                "builds": [{**build, "llm_calls": 0, "cache_hits": 5, "wall_s": 1.0}]}
    assert metric_differences(bundled, replayed) == []
    replayed["rows"] = [{**row, "f1": 0.25}]
    replayed["builds"] = [{**build, "entities": 8}]
    assert metric_differences(bundled, replayed) == ["rows dense.f1: 0.5 → 0.25",
                                                     "builds kg.entities: 9 → 8"]


def test_a_replay_folder_on_a_full_disk_is_one_error(project, tmp_path, capsys, monkeypatch):
    _, bundle = bundled_run(project, tmp_path)
    real_write = Path.write_bytes

    def fills_up(self: Path, data: bytes) -> int:
        if self.name == "calls.jsonl":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", fills_up)
    folder = tmp_path / "replay"
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder))
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"kgrag: error: cannot write the replay of tiny.tar.gz in {folder}: "
                          "no space left on its disk; free space there")


# ARK at its smallest: one stage, three training questions of eight, a few steps
ARK = {"name": "ark", "method": "ark", "max_questions": 3, "candidates": 4, "positives": 2,
       "augmented": 3, "epochs": [1, 1, 1], "batch_size": 4, "negatives": 2,
       "hard_negatives": 5, "max_seq_length": 64, "warmup_steps": 0,
       "learning_rates": [1e-4, 1e-4, 1e-4], "stages": 1}


@pytest.fixture(scope="module")
def ark_bundle(tmp_path_factory) -> tuple[Path, Path]:
    """The README's ARK example run and bundled: ``models.embedder`` names a training
    entry, so the dense index and every question are embedded by the trained MiniLM."""
    root = tmp_path_factory.mktemp("ark")
    project = make_project(root / "proj")
    lines = (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:8]
    (project / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    spec = write_spec(project, "ark", models={"embedder": {"model": "ark"}},
                      extraction={"method": "nlp"}, training=[ARK],
                      query=[{"name": "tuned", "strategy": "naive", "budget_tokens": 1000}],
                      answer={"questions": 0}, evaluate={"metrics": ["recall@5", "coverage"]},
                      cache={"dir": "../calls"})  # module-scoped: not the isolated cache
    llm = RuleLLM()
    run_with(spec, llm)
    assert llm.calls.count("logprob") > 0  # ARK's alignment scores were paid for
    bundle = root / "ark.tar.gz"
    assert main(["bundle", str(spec), "-o", str(bundle)]) == 0
    return spec, bundle


def test_a_spec_whose_embedder_is_a_trained_entry_replays_with_no_model_call(
        ark_bundle, tmp_path, capsys, monkeypatch):
    """The bundle names the base MiniLM (a model the replaying machine must hold) and
    the trained one as the run's own work; the replay trains it again and answers every
    model call from the bundle."""
    spec, bundle = ark_bundle
    index, _ = read_archive(bundle)
    session = api.open_session(spec)
    trained = session.plan.by_name()["stage1.ark"].fingerprint
    base = session.models.embedder_model("all-MiniLM-L6-v2")
    session.cache.close()
    assert index["models"]["embedder"] == {"name": "ark", "sha256": trained}
    assert index["models"]["embedder:all-MiniLM-L6-v2"] == {"name": "all-MiniLM-L6-v2",
                                                            "sha256": base.sha256}

    def refuse(*args, **kwargs):
        raise AssertionError("a model was called during the replay")

    monkeypatch.setattr(llamacpp.LlamaCppBackend, "generate", refuse)
    monkeypatch.setattr(llamacpp.LlamaCppBackend, "logprobs", refuse)
    monkeypatch.setattr(embed.SentenceTransformerBackend, "encode", refuse)
    folder = tmp_path / "elsewhere"
    code, out, err = run_cli(capsys, "replay", str(bundle), "--dir", str(folder))
    assert code == 0 and "error" not in err  # err: the trainer's own progress bars
    assert f"replayed in {folder}: 0 model calls;" in out
    assert "metrics.json: identical to the bundle's apart from timings" in out
    bundled = json.loads((spec.parent.parent / "outputs/ark/metrics.json").read_text())
    replayed = json.loads((folder / "project/outputs/ark/metrics.json").read_text())
    assert metric_differences(bundled, replayed) == []
    assert replayed["rows"][0]["recall@5"] is not None


def test_a_replay_names_a_training_base_that_differs_here(ark_bundle, tmp_path, capsys,
                                                          monkeypatch):
    """A training entry's base is asked of ``Models`` like the spec's own embedder."""
    _, bundle = ark_bundle

    def other_minilm(name, base=None):
        return ResolvedModel(name, "embedder", Path("/models/minilm"), "f" * 64, True)

    monkeypatch.setattr(models, "resolve_embedder", other_minilm)
    code, _, err = run_cli(capsys, "replay", str(bundle), "--dir", str(tmp_path / "r"))
    assert code == 2 and len(err.splitlines()) == 1
    assert ("model all-MiniLM-L6-v2 (embedder:all-MiniLM-L6-v2) differs: the bundle was "
            "made with sha256 ") in err and f"/models/minilm has {'f' * 16}…" in err
    assert "(embedder)" not in err  # the trained model is the replay's own work


def test_a_strategys_own_embedder_is_described_and_compared(project, tmp_path):
    """A strategy's own ``embedder`` (another model folder) is one of the models a
    bundle names, and a replay asks the spec's models for it by the same name."""
    folder = tmp_path / "minilm-copy"
    shutil.copytree(resolve_embedder("all-MiniLM-L6-v2").path, folder)
    (folder / "NOTE.txt").write_text("a copy: another folder, so another identity\n")
    spec = write_spec(project, **{**SECTIONS, "query": [
        {"name": "dense", "strategy": "naive", "budget_tokens": 300},
        {"name": "own", "strategy": "naive", "embedder": str(folder), "budget_tokens": 300}]})
    session = api.open_session(spec)
    described = session.models.describe(step.config for step in session.plan.steps)
    own = described[f"embedder:{folder}"]
    assert own["sha256"] == resolve_embedder(str(folder)).sha256 != described["embedder"]["sha256"]
    assert session.models.differences(described) == []
    changed = {**described, f"embedder:{folder}": {**own, "sha256": "0" * 64}}
    differs = (f"model {folder} (embedder:{folder}) differs: the bundle was made with "
               f"sha256 {'0' * 16}…, {folder} has {own['sha256'][:16]}…")
    assert session.models.differences(changed) == [differs]
    session.cache.close()
