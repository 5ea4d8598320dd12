"""RAS's plans (Jiang et al., Eq. 1–2, Fig. 15/19): what to do next for a question.

A plan is one of three forms: ``[NO_RETRIEVAL]`` (answer closed-book; asked only
before anything was retrieved), ``[SUBQ] q`` (retrieve for the sub-query q) or
``[SUFFICIENT]`` (stop and answer). The few-shot planner asks the spec's LLM under a
grammar that allows only these forms (a sub-query is one line ending in a question
mark); a reply that still is none of them (cut off by the token cap before its question
mark, or an empty sub-query) is read as ``[SUFFICIENT]`` and counted by the caller
(``Plan.valid`` is false).

The forms, their grammar and the history both the planner and the answerer read are
RAS's text (``kgrag.training.ras_text``): the Graph-LLM is trained on the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgrag.models.llm import CachedLLM
from kgrag.training.ras_text import NO_RETRIEVAL, PLAN_GRAMMAR, SUBQ, SUFFICIENT, history

PLAN_MAX_TOKENS = 48


@dataclass(frozen=True)
class Plan:
    """One parsed plan: ``kind`` is NO_RETRIEVAL, SUBQ or SUFFICIENT; ``query`` the
    sub-query of a SUBQ; ``valid`` false when the reply was none of the forms."""

    kind: str
    query: str = ""
    valid: bool = True


def parse_plan(reply: str) -> Plan:
    """The plan a reply states; anything else is an invalid plan read as SUFFICIENT."""
    text = reply.strip()
    if text == NO_RETRIEVAL:
        return Plan(NO_RETRIEVAL)
    if text == SUFFICIENT:
        return Plan(SUFFICIENT)
    if text.startswith(SUBQ):
        query = " ".join(text[len(SUBQ):].split())
        if query.endswith("?") and len(query) > 1 and "[" not in query:
            return Plan(SUBQ, query)
    return Plan(SUFFICIENT, valid=False)


PLAN_INSTRUCTION = (
    "You plan the retrieval for a multi-hop question. Reply with exactly one line:\n"
    f"{NO_RETRIEVAL} if the question needs no retrieval at all;\n"
    f"{SUBQ} <question> to retrieve for one more simple sub-question that the information "
    "so far does not answer (never repeat an earlier sub-question);\n"
    f"{SUFFICIENT} if the retrieved information is enough to answer the question.")
PLAN_EXAMPLES = (
    (history([], "What is 7 times 6?"), NO_RETRIEVAL),
    (history([("Who directed the film Tinker Tailor Soldier Spy?",
               "(S> Tinker Tailor Soldier Spy| P> directed by| O> Tomas Alfredson)")],
             "In which country was the director of Tinker Tailor Soldier Spy born?"),
     f"{SUBQ} Where was Tomas Alfredson born?"),
    (history([("Who directed the film Tinker Tailor Soldier Spy?",
               "(S> Tinker Tailor Soldier Spy| P> directed by| O> Tomas Alfredson)"),
              ("Where was Tomas Alfredson born?",
               "(S> Tomas Alfredson| P> born in| O> Sweden)")],
             "In which country was the director of Tinker Tailor Soldier Spy born?"),
     SUFFICIENT),
)


def plan_prompt(text: str) -> str:
    """The few-shot planning prompt for one history (``history``)."""
    shots = "\n\n".join(f"{shot}\nPlan: {plan}" for shot, plan in PLAN_EXAMPLES)
    return f"{PLAN_INSTRUCTION}\n\n{shots}\n\n{text}\nPlan:"


def few_shot_plan(llm: CachedLLM, text: str, style: str) -> Plan:
    """One grammar-constrained planning call of the spec's LLM on a history."""
    reply = llm.ask(plan_prompt(text), style=style, max_tokens=PLAN_MAX_TOKENS,
                    grammar=PLAN_GRAMMAR).text
    return parse_plan(reply)
