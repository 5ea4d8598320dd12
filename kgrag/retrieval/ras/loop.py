"""RAS's iterative plan / retrieve / structure loop (Jiang et al., Alg. §3).

For one question Q:

1. plan before retrieving (Eq. 1): ``[NO_RETRIEVAL]`` answers closed-book (empty
   context); otherwise the first sub-query is Q itself;
2. retrieve the ``retrieve_k`` best passages for the sub-query (5, the paper's) that the
   loop has not retrieved yet, ranked by the query entry that ``retriever`` names
   (any strategy that ranks chunks: naive, bm25, ppr, a naive over a trained
   embedder), so every iteration adds new evidence;
3. text-to-triples with the spec's extraction (``kgrag.retrieval.ras.triples``), the
   first ``triples_per_passage`` of each passage;
4. merge the new triples into the per-query graph, as this sub-query's subgraph;
5. plan again on the history (Eq. 2): ``[SUFFICIENT]`` stops, ``[SUBQ] q`` iterates
   with q, at most ``max_iterations`` retrievals in all.

The context is the history (``kgrag.training.ras_text.history`` without the question
line: the answer prompt adds it): every sub-query with its triples, filled into
``budget_tokens`` (triples that do not fit are dropped and counted). ``evidence:
passages`` (ablation "no text-to-triples") shows each sub-query's passages instead.

Planning is the few-shot prompted spec LLM under the plan grammar
(``kgrag.retrieval.ras.plan.few_shot_plan``), or, when ``graph_llm`` names a training entry of
method ``ras`` (or, as a path, the folder such an entry wrote in another spec: one
planner trained on one corpus, run on others), the trained Graph-LLM, which reads the
graph token of the subgraphs so far (``graph_encoder: false`` gives it an empty graph:
the inference ablation).
``planning: fixed`` (ablation "no planning") makes no plan call: it retrieves
``max_iterations`` times for Q itself, each time the next ``retrieve_k`` passages.
``planning: oracle`` replaces the planner by the question's gold sub-questions, then
``[SUFFICIENT]`` (``kgrag.retrieval.ras.oracle``): everything else runs as it does, so
its gap to a real planner is the planner's share.

Answering: with a Graph-LLM, the loop answers too (Eq. 8: the answer is conditioned
on the graph token, which only the loop holds) and the trace carries it; the answer
step copies it (``answers_in_trace``). Without one, kgrag's answer step answers from
the history like any context.

Each question's trace holds the plans, each iteration's sub-query, retrieved ids,
triples added, passages with no triple and times (LLM apart), the stop reason and the
number of invalid plan replies (each read as ``[SUFFICIENT]``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.declarations import (
    Config,
)
from kgrag.errors import KgragError
from kgrag.retrieval.budget import fill_budget
from kgrag.retrieval.ras.oracle import GoldPlans, oracle_plan, subquery_writer
from kgrag.retrieval.ras.plan import Plan, few_shot_plan, parse_plan
from kgrag.retrieval.ras.triples import QueryGraph, passage, text_to_triples
from kgrag.retrieval.units import Evidence
from kgrag.training.ras_text import (
    GRAPH_INFO,
    NO_RETRIEVAL,
    SUBQ,
    SUFFICIENT,
    answer_input,
    history,
    plan_input,
    render,
)

if TYPE_CHECKING:
    from kgrag.retrieval.resources import Resources

GRAPH_LLM_PLAN_TOKENS = 48


def check_iterations(config: Config) -> None:
    if config["max_iterations"] < 1:
        raise KgragError(f"strategy {config['name']!r}: max_iterations must be at least 1, "
                         f"not {config['max_iterations']}")


class RasStrategy:
    """The RAS loop over one ranking retriever (see the module docstring)."""

    def __init__(self, config: Config, retriever: Any, resources: Resources,
                 to_triples: Any, graph_llm: Any = None, gold: GoldPlans | None = None
                 ) -> None:
        check_iterations(config)
        self.config, self.retriever, self.graph_llm, self.gold = config, retriever, graph_llm, gold
        self.units, self.tokenizer = resources.chunks, resources.tokenizer
        self.embedder, self.llm, self.style = resources.embedder, resources.llm, resources.prompt_style
        self.to_triples = to_triples

    @classmethod
    def load(cls, config: Config, artefacts: dict[str, Path], resources: Resources
             ) -> RasStrategy:
        check_iterations(config)
        retriever = resources.members["retriever"]
        models = resources.models
        to_triples = (text_to_triples(config["extraction"], models)
                      if config["evidence"] == "triples" else None)
        graph_llm = None
        if config.get("graph_llm"):
            from kgrag.training.graph_llm.model import load_cached_graph_llm

            folder = ((models.base_dir / config["graph_llm"]).resolve()
                      if trained_elsewhere(config) else artefacts["graph_llm"])
            graph_llm = load_cached_graph_llm(folder, models)
        elif config["planning"] == "few_shot" and resources.llm is None:
            raise KgragError(f"strategy {config['name']!r}: few-shot planning needs an LLM")
        gold = None
        if config["planning"] == "oracle":
            gold = GoldPlans(artefacts["corpus"], subquery_writer(resources),
                             max(1, config["max_iterations"] - 1))
        return cls(config, retriever, resources, to_triples, graph_llm, gold)

    # -- one model call each, timed and counted -------------------------------------------
    def _plan(self, steps: list[tuple[str, str]], subgraphs: list, question: str,
              spent: dict[str, float]) -> Plan:
        started = time.perf_counter()
        text = history(steps, question)
        if self.gold is not None:
            plan = oracle_plan(self.gold(question), question, len(steps))
        elif self.graph_llm is not None:
            reply = self.graph_llm.generate(
                plan_input(text), list(subgraphs) if self.config["graph_encoder"] else [],
                GRAPH_LLM_PLAN_TOKENS)
            plan = parse_plan(reply)
        else:
            plan = few_shot_plan(self.llm, text, self.style)
        spent["llm_ms"] += (time.perf_counter() - started) * 1000
        spent["calls"] += 1
        return plan

    def retrieve(self, question: str, vector: np.ndarray) -> Evidence:
        c = self.config
        before = self.llm.usage.snapshot() if self.llm is not None else None
        spent = {"llm_ms": 0.0, "calls": 0}
        graph = QueryGraph()
        steps: list[tuple[str, str]] = []  # (sub-query, its graph information)
        iterations: list[dict[str, Any]] = []
        plans: list[str] = []
        invalid = 0
        seen: list[str] = []
        fixed = c["planning"] == "fixed"
        stop = "max_iterations"
        query = question
        if not fixed:
            first = self._plan([], [], question, spent)
            plans.append(_shown(first))
            invalid += not first.valid
            if first.kind == NO_RETRIEVAL:
                stop, query = "no_retrieval", ""
        used = 0
        while query and len(iterations) < c["max_iterations"]:
            started, llm_before = time.perf_counter(), spent["llm_ms"]
            q_vector = vector if query == question else self.embedder.encode([query])[0]
            ranked = [u for u in self.retriever.ranking(query, q_vector) if u not in seen]
            new = ranked[: c["retrieve_k"]]
            seen += new
            used += self.tokenizer.count(f"{SUBQ} {query}\n{GRAPH_INFO}") + 2  # the heads
            info, used, record = self._structure(new, graph, used)
            steps.append((query, info))
            record |= {"query": query, "retrieved": new}
            if fixed:
                query = question if len(iterations) + 1 < c["max_iterations"] else ""
            else:
                plan = self._plan(steps, graph.subgraphs, question, spent)
                plans.append(_shown(plan))
                invalid += not plan.valid
                if plan.kind == SUBQ:
                    query = plan.query
                else:
                    stop = "sufficient" if plan.valid else "invalid_plan"
                    query = ""
            record["ms"] = round((time.perf_counter() - started) * 1000, 3)
            record["llm_ms"] = round(spent["llm_ms"] - llm_before, 3)
            iterations.append(record)
        context = "\n".join(line for subq, info in steps
                            for line in (f"{SUBQ} {subq}", f"{GRAPH_INFO} {info}"))
        trace: dict[str, Any] = {
            "plans": plans, "invalid_plans": invalid, "iterations": len(iterations),
            "steps": iterations, "stop": stop,
            "graph": {"nodes": graph.nodes, "edges": graph.edges}}
        if stop == "no_retrieval":
            trace["no_retrieval"] = True
        if invalid:
            trace["fallback"] = f"{invalid} plan replies of none of the three forms: read as " \
                                f"{SUFFICIENT}"
        if self.graph_llm is not None:
            started = time.perf_counter()
            trace["answer"] = self.graph_llm.generate(
                answer_input(history(steps, question)),
                list(graph.subgraphs) if c["graph_encoder"] else [], c["answer_tokens"]).strip()
            # its time is the loop's LLM time; the call is the answer step's to count
            spent["llm_ms"] += (time.perf_counter() - started) * 1000
        calls, tokens_in, tokens_out = int(spent["calls"]), 0, 0
        if before is not None:  # the spec LLM's requests: plans and LLM extraction
            used_llm = self.llm.usage.since(before)
            calls = used_llm.calls + used_llm.cache_hits + (
                int(spent["calls"]) if self.graph_llm is not None else 0)
            tokens_in, tokens_out = used_llm.tokens_in, used_llm.tokens_out
        doc_ids = [self.units.doc[u] for u in seen]
        return Evidence(seen, doc_ids, context, self.tokenizer.count(context), trace=trace,
                        llm_calls=calls, llm_tokens_in=tokens_in, llm_tokens_out=tokens_out,
                        llm_ms=spent["llm_ms"])

    def _structure(self, new: list[str], graph: QueryGraph, used: int
                   ) -> tuple[str, int, dict[str, Any]]:
        """One sub-query's graph information (its triples, or its passages in the
        ablation) within what is left of the budget, and the iteration's record."""
        budget = self.config["budget_tokens"]
        if self.to_triples is None:  # ablation: raw passages
            passages = fill_budget(new, self.units.tokens, budget - used)
            graph.merge([])
            return ("\n".join(self.units.text[u] for u in passages),
                    used + sum(self.units.tokens[u] for u in passages),
                    {"passages_kept": len(passages)})
        cap = self.config["triples_per_passage"]
        per_passage = [found[:cap] for found in
                       self.to_triples([passage(u, self.units.text[u]) for u in new])]
        added = graph.merge([t for triples in per_passage for t in triples])
        rendered = {t: render([t]) for t in added}
        sizes = {t: self.tokenizer.count(text) + 2 for t, text in rendered.items()}  # and ", "
        kept = fill_budget(added, sizes, budget - used)
        record = {"triples_added": len(added), "triples_dropped_for_budget": len(added) - len(kept),
                  "no_triple_passages": [u for u, t in zip(new, per_passage) if not t]}
        return render(kept), used + sum(sizes[t] for t in kept), record


def _shown(plan: Plan) -> str:
    return f"{SUBQ} {plan.query}" if plan.kind == SUBQ else (
        plan.kind if plan.valid else f"invalid -> {SUFFICIENT}")


def trained_elsewhere(config: Config) -> bool:
    """Whether ``graph_llm`` is the path of another spec's trained folder (a training
    entry's name never holds a '/')."""
    return "/" in (config.get("graph_llm") or "")
