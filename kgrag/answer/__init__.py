"""Answers from a retrieved context: generated freely (``generate``), or chosen among the
context's own spans (``extractive``, over the candidates of ``spans``); with citations,
the context numbered part by part (``parts``).

The names other layers import are re-exported here, where the docs name them."""

from kgrag.answer.generate import (
    INSUFFICIENT,
    answer,
    citation_grammar,
    cited_answer,
    completion_prompt,
    parse_citations,
)

__all__ = ["INSUFFICIENT", "answer", "citation_grammar", "cited_answer", "completion_prompt",
           "parse_citations"]
