"""Strategy ``ras``: RAS (Jiang et al.), declared: its parameters, what it reads, its own
spec checks and its model calls. The loop that plans, retrieves and structures is
``kgrag.retrieval.ras.loop``; the text it reads and writes is
``kgrag.training.ras_text``.
"""

from __future__ import annotations

from collections.abc import Iterator

from kgrag.declarations import Config, ExtractionMethod, Need, Param, Problem, Strategy, TrainedRef
from kgrag.graphs.extraction.methods import method_of
from kgrag.limits import ITEMS_MAX, ROUNDS_MAX, TOKENS_MAX
from kgrag.retrieval.ras.loop import RasStrategy, trained_elsewhere
from kgrag.retrieval.ras.oracle import ORACLE_SOURCES

WHY_GRAPH_LLM = "graph_llm names the trained planner-answerer"


def _extracting(config: Config) -> ExtractionMethod | None:
    """The extraction method that turns passages into triples, if the loop does."""
    return method_of(config["extraction"]) if config["evidence"] == "triples" else None


def uses_llm(config: Config) -> bool:
    """Whether the loop calls the spec's LLM: to plan few-shot or to write an oracle's
    HotpotQA-SUBQ sub-queries. Its text-to-triples calls the extraction's LLM, whose
    identity the ``extraction`` config already holds."""
    return config["planning"] == "oracle" or (
        config["planning"] == "few_shot" and not config.get("graph_llm"))


def calls(config: Config) -> int:
    """Model requests per question at most (before retries): a plan before and after each
    retrieval (an oracle: a sub-query per later retrieval, where the LLM writes them), an
    answer from a Graph-LLM, and the extraction's calls per passage."""
    n = config["max_iterations"]
    planned = {"fixed": 0, "oracle": n - 1}.get(config["planning"], 1 + n)
    method = _extracting(config)
    extracted = n * config["retrieve_k"] * method.llm_calls_per_chunk if method else 0
    return planned + bool(config.get("graph_llm")) + extracted


def _needs(config: Config) -> dict[str, Need]:
    """The Graph-LLM's folder, and the corpus for an oracle's gold sub-questions (the
    retriever's artefacts are its member's: ``kgrag.retrieval``)."""
    needs: dict[str, Need] = {}
    if config.get("graph_llm") and not trained_elsewhere(config):
        needs["graph_llm"] = TrainedRef("graph_llm", "graph_llm", WHY_GRAPH_LLM)
    if config.get("planning") == "oracle":
        needs["corpus"] = "corpus"
    return needs


def _with_retriever(config: Config, extraction: Config) -> Config:
    """The entry once its retriever is a concrete config: its fingerprint covers the
    retriever's embedder (the questions' and sub-queries' vectors are the retriever's)
    and the spec's extraction, which turns its passages into triples."""
    resolved = dict(config)
    if config["retriever"].get("embedder"):
        resolved["embedder"] = config["retriever"]["embedder"]
    if config["evidence"] == "triples":
        resolved["extraction"] = extraction
    return resolved


def _problems(index: int, raw: Config, entry: Config, spec: Config) -> Iterator[Problem]:
    """``retriever`` must be given (``kgrag.spec.references`` checks that it names
    another entry that ranks chunks); the Graph-LLM's switches need one; an oracle needs
    gold sub-questions."""
    if raw.get("retriever") is None:
        yield ("query", index), "strategy ras needs 'retriever': the name of another query entry"
    if raw.get("graph_llm") is None and raw.get("graph_encoder") is False:
        yield ("query", index, "graph_encoder"), "graph_encoder applies only with a graph_llm"
    dataset = spec["corpus"].get("dataset")
    if raw.get("planning") == "oracle" and dataset not in ORACLE_SOURCES:
        yield ("query", index, "planning"), (
            f"planning: oracle needs gold sub-questions, and dataset {dataset!r} has none "
            f"(the datasets that have: "
            f"{'; '.join(f'{k}, {v}' for k, v in ORACLE_SOURCES.items())})")


DECLARATION = Strategy(
    "ras", "RAS: iterative planning, retrieval of top-k passages with another entry's "
    "ranking, text-to-triples and a per-query graph; few-shot or a trained Graph-LLM.",
    (Param("retriever", {"type": "string", "minLength": 1},
           "name of another query entry whose ranking retrieves for each sub-query (naive, "
           "bm25, ppr; a naive over a trained embedder)."),
     Param("retrieve_k", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
           "passages retrieved per sub-query (new to the loop).", default=5),
     Param("max_iterations", {"type": "integer", "minimum": 1, "maximum": ROUNDS_MAX},
           "retrievals per question at most (the paper's 5).", default=5),
     Param("planning", {"enum": ["few_shot", "fixed", "oracle"]},
           "few_shot (the planner decides: the spec's LLM few-shot, or the graph_llm), "
           "fixed (ablation 'no planning': max_iterations retrievals for the question itself, "
           "no plan call) or oracle (the question's gold sub-questions in order, then "
           "[SUFFICIENT]: MuSiQue's question_decomposition, HotpotQA-SUBQ's sub-queries of "
           "HotpotQA's supporting paragraphs).", default="few_shot"),
     Param("evidence", {"enum": ["triples", "passages"]},
           "what the history shows per sub-query: triples (text-to-triples with the spec's "
           "extraction) or passages (ablation 'no text-to-triples').", default="triples"),
     Param("triples_per_passage", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
           "triples kept of each passage, in the order the extraction states them (the "
           "paper's t2t model writes about 20 per query graph; spaCy states about 40 per "
           "paragraph, which would fill the budget in one iteration).", default=8),
     Param("graph_llm", {"type": ["string", "null"]},
           "name of a training entry of method ras: its Graph-LLM plans and answers; or, "
           "holding a '/', the path (from the spec's folder) of the artefact folder such an "
           "entry wrote in another spec (graph_llm.<entry>-<fingerprint>: a retrained "
           "model has another path); null: few-shot planning with the spec's LLM and "
           "kgrag's answer step.", default=None),
     Param("graph_encoder", {"type": "boolean"},
           "give the Graph-LLM the graph token (ablation 'no graph encoder' at inference: "
           "false).", default=True),
     Param("answer_tokens", {"type": "integer", "minimum": 1, "maximum": TOKENS_MAX},
           "new tokens of a Graph-LLM answer.", default=32)),
    RasStrategy, _needs, problems=_problems, uses_llm=uses_llm, calls_per_question=calls,
    answers_in_trace=lambda config: bool(config.get("graph_llm")), member_key="retriever",
    with_members=_with_retriever)
