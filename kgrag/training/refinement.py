"""ReG's LLM refinement of weak supervision (step 4): the numbered candidate paths, the
question and its answers go to the LLM, which names the paths that support the answer
as ``ans: Path i`` lines, constrained by a grammar to the numbers shown.

The prompt is the paper's instruction, shortened for a small local model, with one short
worked example (the paper's Little Joe demonstration is too long for a 135M model's
speed). The refined positives are the triples of every selected candidate (all its merged
members); a reply that selects nothing parseable falls back to the weak labels (the step
counts it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

INSTRUCTION = (
    "Given a question, its answer and numbered reasoning paths, select the paths that "
    "support the answer: keep paths whose relations match the question's meaning, reject "
    "paths with only irrelevant details. Write each selected path on its own line as "
    "'ans: Path i'."
)
EXAMPLE = (
    "Paths:\nPath 0. Lou Seal → [sports.mascot.team] → San Francisco Giants\n"
    "Path 1. Lou Seal → [common.topic.notable_types] → Mascot\n"
    "Question: which team has the mascot Lou Seal?\nAnswer(s): San Francisco Giants\n"
    "ans: Path 0\n"
)
LINE = re.compile(r"^\s*ans:\s*Path\s+(\d+)\s*$", re.IGNORECASE | re.MULTILINE)


def prompt(question: str, answers: Sequence[str], paths: Sequence[str]) -> str:
    numbered = "\n".join(f"Path {i}. {text}" for i, text in enumerate(paths))
    return (f"{INSTRUCTION}\n\n{EXAMPLE}\nPaths:\n{numbered}\nQuestion: {question}\n"
            f"Answer(s): {'; '.join(answers)}\n")


def grammar(shown: int) -> str:
    """GBNF for one to ``shown`` lines ``ans: Path i``, i among the numbers shown."""
    numbers = " | ".join(f'"{i}"' for i in range(shown))
    return f'root ::= line{{1,{shown}}}\nline ::= "ans: Path " ({numbers}) "\\n"\n'


def selected(reply: str, shown: int) -> list[int]:
    """The path numbers a reply selects, in order, each once; numbers not shown are
    ignored (a reply without any is unparseable)."""
    picked = (int(m) for m in LINE.findall(reply))
    return list(dict.fromkeys(i for i in picked if i < shown))
