"""One description per entity or relationship: GraphRAG's description summaries.

An entity named in several chunks gets one description from each, which ``merge``
joins distinct and in order. GraphRAG then asks the LLM to write one description
from them; KET-RAG's skeleton inherits that step, and kgrag makes it optional
(``summarise_descriptions`` on a skeleton build) because it costs one call per
entity or relationship seen in more than one chunk, and with the bundled models a
summary rarely says more than the joined descriptions did.

A summary is constrained to a bounded string without control characters, cached
like every call, and replaced by the joined descriptions when it never validates,
so the build always completes; the number of such fallbacks is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kgrag.graphs.extraction.prompt import Style, text_field
from kgrag.graphs.merge import DESCRIPTION_SEPARATOR
from kgrag.models.llm import CachedLLM, InvalidOutput
from kgrag.progress import progress

MAX_SUMMARY_CHARS = 200
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"description": text_field(1, MAX_SUMMARY_CHARS)},
    "required": ["description"],
    "additionalProperties": False,
}
# At most 1.5 tokens per character of a summary, plus the JSON around it.
MAX_TOKENS = 16 + 3 * MAX_SUMMARY_CHARS // 2


def summary_prompt(subject: str, descriptions: Sequence[str]) -> str:
    """The instruction for one entity (``subject`` is its name) or relationship
    (``"A -- B"``), its descriptions one per line."""
    listed = "\n".join(f"- {d}" for d in descriptions)
    return (f"Write one short description of {subject} that combines every fact in the "
            "descriptions below. Use only those facts; where they contradict each other, "
            f"keep both. Answer with JSON only.\n\nDescriptions of {subject}:\n{listed}")


@dataclass(frozen=True)
class Summaries:
    """One description per row, and how many were summarised or fell back."""

    descriptions: list[str]
    summarised: int
    fallbacks: int


def summarise(llm: CachedLLM, subjects: Sequence[str], joined: Sequence[str], *,
              style: Style) -> Summaries:
    """Summarise every description in ``joined`` that joins two or more; the others,
    and those whose summary never validates (or is blank), stay as they are."""
    out: list[str] = []
    summarised = fallbacks = 0
    for subject, description in progress(zip(subjects, joined), len(subjects),
                                         "summarise descriptions"):
        parts = description.split(DESCRIPTION_SEPARATOR)
        summary = ""
        if len(parts) >= 2:
            summarised += 1
            try:
                value, _ = llm.ask_json(summary_prompt(subject, parts), SCHEMA, style=style,
                                        max_tokens=MAX_TOKENS)
                summary = value["description"].strip()
            except InvalidOutput:
                pass
            fallbacks += not summary
        out.append(summary or description)
    return Summaries(out, summarised, fallbacks)
