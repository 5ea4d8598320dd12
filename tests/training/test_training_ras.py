"""RAS's training data (HotpotQA-SUBQ, Algorithm 1), its training entry, the cached
Graph-LLM and the loop driven by a Graph-LLM (a scripted stand-in: the real one is
tests/training/test_graph_llm.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.errors import KgragError
from kgrag.models.cache import CallCache
from kgrag.models.graph_llm import IDENTITY, CachedGraphLLM
from kgrag.models.registry import resolve_embedder
from kgrag.pipeline.runner import run_plan
from kgrag.retrieval import Resources
from kgrag.retrieval.ras.loop import RasStrategy
from kgrag.retrieval.units import Units
from kgrag.spec.load import load_spec
from kgrag.training.graph_llm.model import load_cached_graph_llm
from kgrag.training.subq import Document, samples_of, statistics
from tests.conftest import write_spec
from tests.standin import RuleLLM, open_with, run_with

DOCS = [Document("Alien", "Alien is a film by Ridley Scott."),
        Document("Ridley Scott", "Ridley Scott was born in South Shields.")]
TRIPLES = [[("Alien", "directed by", "Ridley Scott")], [("Ridley Scott", "born in", "South Shields")]]


def test_a_question_the_llm_knows_gives_no_retrieval_and_its_answer_only():
    samples = samples_of("q", "Who?", "Scott", DOCS, True, [], [])
    assert [(s.task, s.target, s.subgraphs) for s in samples] == [
        ("plan", "[NO_RETRIEVAL]", []), ("answer", "Scott", [])]


def test_algorithm_1_labels_each_history_with_the_next_subquery_then_sufficient():
    samples = samples_of("q", "Where was Alien's director born?", "South Shields", DOCS, False,
                         ["Who directed Alien?", "Where was Ridley Scott born?"], TRIPLES)
    plans = [s for s in samples if s.task == "plan"]
    assert [s.target for s in plans] == ["[SUBQ] Who directed Alien?",
                                         "[SUBQ] Where was Ridley Scott born?", "[SUFFICIENT]"]
    assert [s.subqueries for s in plans] == [0, 1, 2]
    assert [len(s.subgraphs) for s in plans] == [0, 1, 2]
    assert "(S> Alien| P> directed by| O> Ridley Scott)" in plans[1].prompt
    assert plans[2].prompt.endswith("Question: Where was Alien's director born?")
    answer = samples[-1]
    assert (answer.task, answer.target, answer.subgraphs) == ("answer", "South Shields", TRIPLES)


def test_statistics_have_the_table_4_shape():
    samples = samples_of("q1", "Who?", "A", DOCS, True, [], []) + samples_of(
        "q2", "Where?", "B", DOCS, False, ["s0?", "s1?"], TRIPLES)
    figures = statistics(samples, lambda text: len(text.split()))
    assert (figures["planning"], figures["answering"]) == (4, 2)
    assert figures["labels"]["[SUBQ]"] == {"count": 2, "share": 0.5}
    assert figures["labels"]["[NO_RETRIEVAL]"]["count"] == 1
    assert figures["planning_graph"]["edges"]["max"] == 2
    assert figures["answering_subqueries"]["max"] == 2


def training_spec(project: Path, **entry) -> Path:
    return write_spec(
        project, extraction={"method": "nlp"},
        training=[{"name": "planner", "method": "ras", "heldback": 0.5, **entry}],
        query=[{"name": "dense", "strategy": "naive"},
               {"name": "ras", "strategy": "ras", "retriever": "dense", "graph_llm": "planner"}],
        answer={"questions": 0}, evaluate={"metrics": ["recall@5"]})


def test_the_training_entry_builds_samples_then_the_graph_llm_the_strategy_reads(project: Path):
    path = training_spec(project)
    llm = RuleLLM()
    session = open_with(path, llm)
    steps = session.plan.by_name()
    assert steps["graph_llm.planner"].inputs == {"subq": "subq.planner"}
    assert steps["retrieve.ras"].inputs["graph_llm"] == "graph_llm.planner"
    run_plan(session.plan, spec=session.spec, models=session.models, run_dir=session.run_dir,
             steps=[steps[n] for n in ("corpus", "subq.planner")], echo=lambda s: None)
    samples = pl.read_parquet(session.artefact("subq.planner") / "samples.parquet")
    # 3 questions, half train (2): each sub-queried once per supporting paragraph
    assert llm.calls.count("subq") == samples.filter(pl.col("task") == "answer")["subqueries"].sum()
    assert set(samples["task"]) == {"plan", "answer"}
    assert samples["target"].filter(samples["task"] == "plan").str.starts_with(
        "[SUBQ] What is ").any()
    assert samples["heldback"].any() and not samples["heldback"].all()


def test_graph_llm_must_name_a_ras_training_entry(project: Path):
    path = write_spec(
        project, training=[{"name": "tuned", "method": "ark"}],
        query=[{"name": "dense", "strategy": "naive"},
               {"name": "ras", "strategy": "ras", "retriever": "dense", "graph_llm": "tuned"}])
    with pytest.raises(KgragError, match="no training entry named 'tuned' that trains a "
                                         "graph_llm"):
        load_spec(path)


class FakeModel:
    def __init__(self) -> None:
        self.calls = 0

    def generate(self, prompt: str, subgraphs: list, max_new_tokens: int) -> str:
        self.calls += 1
        return f"{len(subgraphs)} graphs"


def test_graph_llm_generations_are_cached_by_identity_prompt_and_graph(cache: CallCache):
    model = FakeModel()
    loads = []

    def load() -> FakeModel:
        loads.append(1)
        return model

    cached = CachedGraphLLM("fp1", cache, load)
    assert cached.generate("p", [[("a", "b", "c")]], 8) == "1 graphs"
    assert cached.generate("p", [[("a", "b", "c")]], 8) == "1 graphs"
    assert cached.generate("p", [], 8) == "0 graphs"
    assert (model.calls, len(loads), cached.usage.calls, cached.usage.cache_hits) == (2, 1, 2, 1)
    warm = CachedGraphLLM("fp1", cache, lambda: pytest.fail("a warm call loads no model"))
    assert warm.generate("p", [], 8) == "0 graphs"
    other = CachedGraphLLM("fp2", cache, load)  # another training: another model
    other.generate("p", [], 8)
    assert model.calls == 3


class Models:
    def __init__(self, cache: CallCache, sha: str) -> None:
        self.cache, self.sha = cache, sha

    def model(self, role: str):
        from kgrag.models.registry import ResolvedModel

        return ResolvedModel("smollm2-135m", "llm", Path("/m.gguf"), self.sha, True)

    def embedder_of(self, sha: str):
        return None


def test_a_graph_llm_trained_on_another_base_llm_is_refused(tmp_path: Path, cache: CallCache):
    (tmp_path / IDENTITY).write_text(json.dumps({"fingerprint": "f", "base_sha256": "a" * 64,
                                                 "embedder": "e"}))
    with pytest.raises(KgragError, match="trained on another base LLM"):
        load_cached_graph_llm(tmp_path, Models(cache, "b" * 64))
    assert load_cached_graph_llm(tmp_path, Models(cache, "a" * 64)).identity == "f"
    with pytest.raises(KgragError, match="holds no trained RAS Graph-LLM"):
        load_cached_graph_llm(tmp_path / "missing", Models(cache, "a" * 64))


class Ranked:
    def ranking(self, question: str, vector: np.ndarray) -> list[str]:
        return ["u1", "u2", "u3"]


class Scripted:
    """A Graph-LLM stand-in: plans one sub-query, then enough; records its graphs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list]] = []

    def generate(self, prompt: str, subgraphs: list, max_new_tokens: int) -> str:
        self.seen.append((prompt, subgraphs))
        if prompt.startswith("Answer"):
            return " Scott \n"
        return "[SUFFICIENT]" if "[SUBQ] Who is it?" in prompt else "[SUBQ] Who is it?"


class Embedder:
    def encode(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)


@pytest.mark.parametrize("encoder", [True, False])
def test_a_graph_llm_plans_and_answers_with_the_graph_token_unless_ablated(encoder: bool):
    units = Units({u: f"# T{u}\ntext {u}" for u in ("u1", "u2", "u3")},
                  {u: 5 for u in ("u1", "u2", "u3")}, {u: f"d{u}" for u in ("u1", "u2", "u3")})
    tokenizer = Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)
    resources = Resources(units, tokenizer, None, embedder=Embedder())
    config = {"name": "ras", "retrieve_k": 2, "max_iterations": 5, "planning": "few_shot",
              "evidence": "triples", "graph_llm": "planner", "graph_encoder": encoder,
              "answer_tokens": 8, "budget_tokens": 500, "triples_per_passage": 8}
    graph_llm = Scripted()
    strategy = RasStrategy(config, Ranked(), resources,
                           lambda chunks: [[(c.title, "is", c.chunk_id)] for c in chunks],
                           graph_llm)
    found = strategy.retrieve("Who?", np.zeros(4, dtype=np.float32))
    assert found.trace["answer"] == "Scott" and found.trace["stop"] == "sufficient"
    assert found.unit_ids == ["u1", "u2", "u3"] and found.trace["iterations"] == 2
    assert found.llm_calls == 3  # three plans; the answer step counts the answer
    graphs = [len(subgraphs) for _, subgraphs in graph_llm.seen]
    assert graphs == ([0, 1, 2, 2] if encoder else [0, 0, 0, 0])


def test_the_graph_llm_step_trains_on_the_kept_samples_and_scores_both_planners(
        project: Path, monkeypatch: pytest.MonkeyPatch):
    from kgrag.training.graph_llm import model as graph_llm
    from kgrag.training.graph_llm import train as graph_llm_train

    trained_on: list = []
    kept: list[Path] = []

    def train(samples, settings, gguf, embed, out: Path, progress, resume: Path) -> dict:
        trained_on.extend(samples)
        kept.append(resume)
        resume.mkdir()  # the real training keeps its last step's state there
        out.mkdir(parents=True)
        return {"base_sha256": session.models.model("answerer").sha256, "wall_s": 1.0,
                "peak_rss_mb": 2.0, "epoch_losses": [0.5], "truncated_prompts": 0,
                "pieces": [{"from_step": 0, "to_step": 1, "threads": 1, "wall_s": 1.0}]}

    class Planner:  # the trained planner always stops
        def generate(self, prompt: str, subgraphs: list, max_new_tokens: int) -> str:
            return "[SUFFICIENT]"

    monkeypatch.setattr(graph_llm_train, "train_graph_llm", train)
    monkeypatch.setattr(graph_llm.GraphLLM, "load", classmethod(lambda cls, *a: Planner()))
    path = training_spec(project)
    llm = RuleLLM(subqueries=1)  # the few-shot planner asks one sub-query, then stops
    session = open_with(path, llm)
    steps = session.plan.by_name()
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, echo=lambda s: None,
                        steps=[steps[n] for n in ("corpus", "subq.planner", "graph_llm.planner")])
    samples = pl.read_parquet(session.artefact("subq.planner") / "samples.parquet")
    assert len(trained_on) == samples.filter(~pl.col("heldback")).height
    folder = session.artefact("graph_llm.planner")
    assert json.loads((folder / IDENTITY).read_text())["fingerprint"] == \
        steps["graph_llm.planner"].fingerprint
    # the training's state beside the artefact, by the step's fingerprint, gone once done
    assert kept == [folder.parent / f".resume-graph_llm.planner-{folder.name[-12:]}"]
    assert not kept[0].exists()
    notes = {s["name"]: s for s in manifest.steps}["graph_llm.planner"]["notes"]
    held = samples.filter(pl.col("heldback") & (pl.col("task") == "plan"))
    stops = (held["target"] == "[SUFFICIENT]").mean()
    assert notes["heldback_plans"] == held.height
    assert notes["planner_accuracy_trained"] == round(stops, 4)
    assert 0 <= notes["planner_accuracy_few_shot"] <= 1


def test_a_trained_row_answers_from_its_loop_and_a_warm_rerun_calls_nothing(
        project: Path, monkeypatch: pytest.MonkeyPatch):
    from kgrag.training.graph_llm import model as graph_llm
    from kgrag.training.graph_llm import train as graph_llm_train

    generated: list[str] = []

    def train(samples, settings, gguf, embed, out: Path, progress, resume: Path) -> dict:
        out.mkdir(parents=True)
        return {"base_sha256": resolve_llm_sha(), "wall_s": 1.0, "peak_rss_mb": 2.0,
                "epoch_losses": [0.5], "truncated_prompts": 0, "pieces": []}

    class Planner:
        def generate(self, prompt: str, subgraphs: list, max_new_tokens: int) -> str:
            generated.append(prompt)
            return "Paris" if prompt.startswith("Answer the question") else "[SUFFICIENT]"

    def resolve_llm_sha() -> str:
        return open_with(path, RuleLLM()).models.model("answerer").sha256

    monkeypatch.setattr(graph_llm_train, "train_graph_llm", train)
    monkeypatch.setattr(graph_llm.GraphLLM, "load", classmethod(lambda cls, *a: Planner()))
    path = training_spec(project)
    spec = json.loads(path.read_text())
    spec["answer"] = {"questions": 1}
    spec["evaluate"] = {"metrics": ["em", "recall@5", "iterations"]}
    path.write_text(json.dumps(spec))
    steps, rows, _ = run_with(path, RuleLLM())
    assert steps["answer.ras"]["kind"] == "answer_from_trace"
    assert rows["ras"]["n_answered"] == 1 and rows["ras"]["iterations"] == 1.0
    answers = pl.read_parquet(open_with(path, RuleLLM()).artefact("answer.ras")
                              / "answers.parquet")
    assert answers["answer"].to_list() == ["Paris"]
    before = len(generated)
    again = RuleLLM()
    run_with(path, again)
    assert again.calls == [] and len(generated) == before


def test_a_passage_with_no_triple_adds_nothing_and_is_recorded():
    units = Units({u: f"# T{u}\ntext {u}" for u in ("u1", "u2", "u3")},
                  {u: 5 for u in ("u1", "u2", "u3")}, {u: f"d{u}" for u in ("u1", "u2", "u3")})
    tokenizer = Tokenizer.from_dir(resolve_embedder("all-MiniLM-L6-v2").path)
    config = {"name": "ras", "retrieve_k": 3, "max_iterations": 1, "planning": "fixed",
              "evidence": "triples", "graph_llm": None, "graph_encoder": True,
              "answer_tokens": 8, "budget_tokens": 500, "triples_per_passage": 8}
    strategy = RasStrategy(config, Ranked(), Resources(units, tokenizer, None,
                                                       embedder=Embedder()),
                           lambda chunks: [[] if c.chunk_id == "u2" else
                                           [(c.title, "is", c.chunk_id)] for c in chunks])
    found = strategy.retrieve("Who?", np.zeros(4, dtype=np.float32))
    step = found.trace["steps"][0]
    assert step["no_triple_passages"] == ["u2"] and step["triples_added"] == 2
    assert "(S> Tu1| P> is| O> u1), (S> Tu3| P> is| O> u3)" in found.text
    assert found.unit_ids == ["u1", "u2", "u3"]  # still retrieved: recall counts it


def test_a_planner_trained_in_another_spec_runs_from_its_folder_by_path(
        project: Path, monkeypatch: pytest.MonkeyPatch):
    import os

    from kgrag.training.graph_llm import model as graph_llm
    from kgrag.training.graph_llm import train as graph_llm_train

    planned: list[str] = []

    def train(samples, settings, gguf, embed, out: Path, progress, resume: Path) -> dict:
        out.mkdir(parents=True)
        return {"base_sha256": session.models.model("answerer").sha256, "wall_s": 1.0,
                "peak_rss_mb": 2.0, "epoch_losses": [0.5], "truncated_prompts": 0,
                "pieces": []}

    class Planner:
        def generate(self, prompt: str, subgraphs: list, max_new_tokens: int) -> str:
            planned.append(prompt)
            return "[SUFFICIENT]"

    monkeypatch.setattr(graph_llm_train, "train_graph_llm", train)
    monkeypatch.setattr(graph_llm.GraphLLM, "load", classmethod(lambda cls, *a: Planner()))
    session = open_with(training_spec(project), RuleLLM())
    steps = session.plan.by_name()
    run_plan(session.plan, spec=session.spec, models=session.models, run_dir=session.run_dir,
             steps=[steps[n] for n in ("corpus", "subq.planner", "graph_llm.planner")],
             echo=lambda s: None)
    folder = os.path.relpath(session.artefact("graph_llm.planner"), project / "specs")

    def elsewhere(path: str) -> Path:
        return write_spec(project, name="elsewhere", query=[
            {"name": "dense", "strategy": "naive"},
            {"name": "ras", "strategy": "ras", "retriever": "dense", "graph_llm": path}],
            answer={"questions": 0}, evaluate={"metrics": ["recall@5", "iterations"]})

    other = open_with(elsewhere(folder), RuleLLM())
    assert not [s for s in other.plan.steps if s.kind in ("ras_subq", "ras_graph_llm")]
    assert "graph_llm" not in other.plan.by_name()["retrieve.ras"].inputs
    _, rows, _ = run_with(elsewhere(folder), RuleLLM())
    assert rows["ras"]["iterations"] == 1.0 and planned  # the trained planner stopped at once
    with pytest.raises(KgragError, match="holds no trained RAS Graph-LLM"):
        run_with(elsewhere("../no/such/folder"), RuleLLM())
