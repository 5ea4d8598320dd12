"""A rule-following stand-in LLM for whole-pipeline tests, and a runner that uses it.

The stand-in answers each kind of request the way a model must (extraction JSON
grounded in the chunk, hybrid triples between offered entities, description
summaries, module summaries, yes / no gate answers, the causal filter's ids), so
whole builds run in seconds and
deterministically with the real embedder, LanceDB and evaluation. The real bundled
models run in tests/integration/.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from kgrag import api
from kgrag.contents.metrics import read_metrics
from kgrag.models.backend import Completion, LLMBackend
from kgrag.pipeline.runner import run_plan

WORD = re.compile(r"\b[A-Z][a-z]{3,}\b")


class RuleLLM:
    """Answers by the request's shape; counts its calls by kind."""

    def __init__(self, *, summaries_parse: bool = True, gate: str = "yes",
                 relate: str = "pair", augment_parse: bool = True,
                 refine_parse: bool = True, plan: str = "subq", subqueries: int = 2) -> None:
        """``relate``: hybrid triples join the first two entities offered ("pair"), the
        first with itself ("self") or do not parse ("broken"). ``augment_parse``: ARK's
        confusing questions parse, or never do. ``refine_parse``: ReG's refinement
        selects the first path shown, or replies with nothing parseable. ``plan``: RAS's
        planner asks ``subqueries`` sub-queries, then says it has enough ("subq"); or
        always says "[SUFFICIENT]", "[NO_RETRIEVAL]", or a reply of none of the forms
        ("broken")."""
        self.calls: list[str] = []
        self.summaries_parse, self.gate, self.relate = summaries_parse, gate, relate
        self.augment_parse, self.refine_parse = augment_parse, refine_parse
        self.plan, self.subqueries = plan, subqueries

    def logprobs(self, requests: list[dict]) -> list[dict]:
        return [self.logprob(r) for r in requests]

    def logprob(self, request: dict) -> dict:
        """ARK's alignment scores: the share of the target's words the context holds,
        less one, so a unit that states the answer scores above one that does not."""
        self.calls.append("logprob")
        context = set(re.findall(r"\w+", request["context"].lower()))
        words = re.findall(r"\w+", request["target"].lower()) or [""]
        mean = sum(w in context for w in words) / len(words) - 1.0
        return {"mean": mean, "tokens": len(request["context"].split()) + len(words),
                "target_tokens": len(words)}

    def generate(self, request: dict) -> Completion:
        prompt = request.get("prompt") or request["messages"][-1]["content"]
        schema = request.get("json_schema") or {}
        props = schema.get("properties", {})
        if "entities" in props:
            kind, text = "extract", self.extraction(prompt.rsplit("Text: ", 1)[1])
        elif "prefixItems" in schema.get("items", {}):
            kind = "relate"  # hybrid extraction: the first two entities offered, related
            first, second = schema["items"]["prefixItems"][0]["enum"][:2]
            text = {"pair": json.dumps([[first, "relates to", second]]),
                    "self": json.dumps([[first, "is", first]]), "broken": "["}[self.relate]
        elif set(props) == {"description"}:
            kind = "description"
            subject = re.search(r"Descriptions of (.+):\n", prompt).group(1)
            text = (json.dumps({"description": f"summary of {subject}"})
                    if self.summaries_parse else "{")
        elif "confusing_questions" in props:
            kind = "augment"
            names = re.findall(r'"name": "([^"]+)"', prompt)
            asked = [f"Which answer do {a} and {b} share?"
                     for a, b in itertools.pairwise(names)][:3] or ["Which answer is it?"]
            text = json.dumps({"confusing_questions": asked}) if self.augment_parse else "{"
        elif "title" in props:
            kind = "summary"
            names = re.findall(r"^- ([^:]+):", prompt, flags=re.MULTILINE)
            text = (json.dumps({"title": " and ".join(names[:2]),
                                "summary": "These entities are studied together: "
                                + ", ".join(names)}) if self.summaries_parse else "{")
        elif request.get("grammar") and "ans: Path" in request["grammar"]:
            kind, text = "refine", "ans: Path 0\n" if self.refine_parse else "Path zero."
        elif request.get("grammar") and prompt.endswith("Sub-question:"):
            kind = "subq"  # RAS's training data: a sub-query on the document's title
            title = re.search(r"\nDocument: (.+)\n", prompt).group(1)
            text = f"[SUBQ] What is {title}?"
        elif request.get("grammar") and "[SUBQ]" in request["grammar"]:
            kind, text = "plan", self.planned(prompt)
        elif request.get("grammar") and "cite ::=" in request["grammar"]:
            kind, text = "answer", self.citing(prompt)
        elif request.get("grammar"):
            kind, text = "gate", self.gate
        elif "precise" in props:
            kind = "filter"
            ids = props["precise"]["items"]["enum"]
            chosen = [i for i in ids if i.startswith("T")][:2] or ids[:1]
            body = {"precise": chosen}
            if "ct_precise" in props:
                body |= {"ct_precise": [], "p_answer": "a guess"}
            text = json.dumps(body)
        elif "prefixed 'ans:'" in prompt:  # KGQA: the tails of the first two triples
            context = prompt.rsplit("Context:\n", 1)[1]
            tails = re.findall(r"\(.+?, .+?, (.+?)\)$", context, flags=re.MULTILINE)[:2]
            kind, text = "answer", "\n".join(f"ans: {t}" for t in tails) or "ans: none"
        else:
            kind, text = "answer", "An answer from the evidence."
        self.calls.append(kind)
        return Completion(text, tokens_in=len(prompt.split()), tokens_out=len(text.split()),
                          cached=False)

    def planned(self, prompt: str) -> str:
        """RAS's plan for the last history of the prompt (after the few-shot examples):
        a sub-query on the question's n-th capitalised word while it has asked fewer than
        ``subqueries``, then "[SUFFICIENT]"."""
        last = prompt.rsplit("\n\n", 1)[1]
        if self.plan != "subq":
            return {"sufficient": "[SUFFICIENT]", "no_retrieval": "[NO_RETRIEVAL]",
                    "broken": "I am not sure."}[self.plan]
        asked = last.count("[SUBQ]")
        if asked >= self.subqueries:
            return "[SUFFICIENT]"
        question = last.rsplit("Question: ", 1)[1]
        words = WORD.findall(question) or ["it"]
        return f"[SUBQ] What is known about {words[asked % len(words)]}?"

    @staticmethod
    def citing(prompt: str) -> str:
        """A cited answer (``answer.cite``): the numbered passages of the last context that
        name a capitalised word of the question, else the first."""
        context, question = prompt.rsplit("Context:\n", 1)[1].rsplit("\n\nQuestion: ", 1)
        words = set(WORD.findall(question))
        passages = re.split(r"\n\n(?=\[\d+\] )", context)
        cited = [i for i, p in enumerate(passages, 1) if words & set(WORD.findall(p))] or [1]
        return "".join(f"[{i}]" for i in cited[:3]) + " An answer from the evidence"

    @staticmethod
    def extraction(text: str) -> str:
        """The first four capitalised words as entities, chained by relationships; each
        description names the chunk's length, so chunks describe an entity apart."""
        names = list(dict.fromkeys(WORD.findall(text)))[:4]
        entities = [{"name": n, "type": "concept",
                     "description": f"{n} in a text of {len(text)} characters"} for n in names]
        relationships = [{"source": a, "target": b, "description": f"{a} relates to {b}",
                          "strength": 5} for a, b in itertools.pairwise(names)]
        return json.dumps({"entities": entities, "relationships": relationships})


def open_with(path: Path, llm: LLMBackend) -> api.Session:
    """Open a spec's session with ``llm`` (behind the real call cache) as every LLM."""
    return api.open_session(path, llm_backend=llm)


def run_with(path: Path, llm: LLMBackend) -> tuple[dict[str, dict], dict[str, dict], list[dict]]:
    """Run a spec with ``llm`` as every LLM; returns its steps' manifest records by name,
    the metrics rows by strategy and the graph build rows."""
    session = open_with(path, llm)
    manifest = run_plan(session.plan, spec=session.spec, models=session.models,
                        run_dir=session.run_dir, echo=lambda s: None)
    metrics: dict[str, Any] = read_metrics(session.run_dir)
    return ({s["name"]: s for s in manifest.steps}, {r["strategy"]: r for r in metrics["rows"]},
            metrics["builds"])
