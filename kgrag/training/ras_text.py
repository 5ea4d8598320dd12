"""RAS's text (Jiang et al., Eq. 1–2, App. B.3): what its planner and Graph-LLM read and
write, in training samples (``kgrag.training.subq``) and in the strategy's loop
(``kgrag.retrieval.ras``) alike, so training and inference read the same text.

A plan is one of three forms: ``[NO_RETRIEVAL]`` (answer closed-book; asked only before
anything was retrieved), ``[SUBQ] q`` (retrieve for the sub-query q) or ``[SUFFICIENT]``
(stop and answer); ``PLAN_GRAMMAR`` allows only these (a sub-query is one line ending in
a question mark).

The history is the text both the planner and the answerer read: each sub-query with the
triples it retrieved, then the question::

    [SUBQ] q0
    Retrieved Graph Information: (S> a| P> b| O> c), (S> …)
    [SUBQ] q1
    Retrieved Graph Information: …
    Question: Q

A triple renders as ``(S> s| P> p| O> o)``, a passage's triples comma-separated.
"""

from __future__ import annotations

from collections.abc import Sequence

Triple = tuple[str, str, str]
NO_RETRIEVAL, SUBQ, SUFFICIENT = "[NO_RETRIEVAL]", "[SUBQ]", "[SUFFICIENT]"
GRAPH_INFO = "Retrieved Graph Information:"
# the three forms; a sub-query is one line without brackets, ending in a question mark
PLAN_GRAMMAR = (
    'root ::= "[NO_RETRIEVAL]" | "[SUFFICIENT]" | "[SUBQ] " subq\n'
    'subq ::= [^\\n\\[\\]?] [^\\n\\[\\]?]* "?"')


def render(triples: Sequence[Triple]) -> str:
    """Triples in the paper's format, comma-separated."""
    return ", ".join(f"(S> {s}| P> {p}| O> {o})" for s, p, o in triples)


def history(steps: list[tuple[str, str]], question: str) -> str:
    """App. B.3's format: each (sub-query, its graph information) then the question."""
    lines = [line for subq, info in steps for line in (f"{SUBQ} {subq}", f"{GRAPH_INFO} {info}")]
    return "\n".join([*lines, f"Question: {question}"])


PLAN_INSTRUCTION = ("Plan the next step for the question: reply [NO_RETRIEVAL], [SUBQ] with "
                    "a sub-question, or [SUFFICIENT].")
ANSWER_INSTRUCTION = ("Answer the question. Each [SUBQ] is followed by the graph information "
                      "it retrieved; use it if it helps. Reply with the shortest answer.")


def plan_input(text: str) -> str:
    """What the Graph-LLM reads to plan (its training samples' prompts are the same)."""
    return f"{PLAN_INSTRUCTION}\n{text}"


def answer_input(text: str) -> str:
    """What the Graph-LLM reads to answer."""
    return f"{ANSWER_INSTRUCTION}\n{text}"
