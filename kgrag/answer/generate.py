"""Short-answer generation from a retrieved context.

The prompt follows KET-RAG's released answer prompt in spirit: context as
data, the shortest possible answer, and an explicit "Insufficient
information." escape so a model is not pushed into guessing. One worked
example shows the expected length, which small models need.

Three lengths: ``list`` (KGQA: every answer on its own ``ans:`` line, ReG's and
SubgraphRAG's format, read by the hit / F1 metrics), ``short`` (the multi-hop benchmarks' entity answers) and ``long``
(HolisQA's few-sentence answers, scored by token F1 against a long gold answer:
"two to four sentences", one worked example of that length, no stop at a line
break).

With citations (``answer.cite``), the context's units are numbered ``[1]``, ``[2]``
… and the answer starts with the numbers of those it comes from, ``[1][2] Denmark``
(``cited_answer``). A grammar keeps the small bundled models to that form: one to
``MAX_CITATIONS`` numbers among those shown, then the answer's text; or the
"Insufficient information." escape. The numbers come first so that they are always
written: a small model given the numbers last rambles on to the token limit before it
writes them (Gemma 3 270M did for a third of the quickstart's questions), and its
answer gets longer, since the grammar has to mask the line break that ends it. The
token budget grows by ``CITE_TOKENS``. A reply without a valid number (a model given by
path that writes them elsewhere; numbers at the end are read too) is an answer without
citations, never an error.

Two renderings of each prompt: ``completion`` (plain few-shot text, the
default: the bundled Gemma 3 270M ships without a chat template and answers
far better this way, and SmolLM2 does too — see docs/results.md, "Which bundled
LLM is the default") and ``chat`` (the model's chat template, for instruction-tuned
models given by path).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kgrag.errors import KgragError
from kgrag.models.backend import Completion
from kgrag.models.llm import CachedLLM, Message

INSUFFICIENT = "Insufficient information."

INSTRUCTION = (
    "Answer the question using only the context. Reply with the shortest possible answer: "
    "a name, a date, a number or a short phrase, never a sentence. If the context does not "
    f"contain the answer, reply exactly: {INSUFFICIENT}"
)

EXAMPLE_CONTEXT = (
    "# Christmas Meeting of 1888\nThe Christmas Meeting of 1888 was a chess tournament held "
    "in Copenhagen.\n\n# Copenhagen\nCopenhagen is the capital of Denmark."
)
EXAMPLE_QUESTION = "In which country was the Christmas Meeting of 1888 held?"
EXAMPLE_ANSWER = "Denmark"


LONG_INSTRUCTION = (
    "Answer the question in two to four sentences, using only the evidence given. Explain "
    "the mechanism or the reasons the evidence states; do not add facts it does not contain. "
    f"If the evidence does not contain the answer, reply exactly: {INSUFFICIENT}"
)
LONG_EXAMPLE_CONTEXT = (
    "Drought reduced stem growth of deciduous trees more than of evergreen trees.\n\n"
    "Deciduous species shed leaves early in dry years, which shortens their growing season."
)
LONG_EXAMPLE_QUESTION = "Why did drought affect deciduous trees more than evergreen trees?"
LONG_EXAMPLE_ANSWER = (
    "Drought reduced the stem growth of deciduous trees more than that of evergreens because "
    "deciduous species shed their leaves early in dry years. This shortens their growing "
    "season, so they grow less during a drought."
)
LIST_INSTRUCTION = (
    "Answer the question using the knowledge-graph evidence. Write every answer on its own "
    "line, prefixed 'ans:'; write only answers named in the evidence."
)
LIST_EXAMPLE_CONTEXT = (
    "Chain 1. Lou Seal → [sports.mascot.team] → San Francisco Giants → "
    "[sports.sports_team.championships] → 2010 World Series; 2012 World Series"
)
LIST_EXAMPLE_QUESTION = "Which championships did the team with the mascot Lou Seal win?"
LIST_EXAMPLE_ANSWER = "ans: 2010 World Series\nans: 2012 World Series"
CITE_INSTRUCTION = (
    " Each passage of the context starts with its number in brackets. Start the answer "
    "with the numbers of the passages it comes from, each in brackets, like [1][2], then "
    "give the answer."
)
LENGTHS = {
    "short": (INSTRUCTION, EXAMPLE_CONTEXT, EXAMPLE_QUESTION, EXAMPLE_ANSWER),
    "long": (LONG_INSTRUCTION, LONG_EXAMPLE_CONTEXT, LONG_EXAMPLE_QUESTION, LONG_EXAMPLE_ANSWER),
    "list": (LIST_INSTRUCTION, LIST_EXAMPLE_CONTEXT, LIST_EXAMPLE_QUESTION, LIST_EXAMPLE_ANSWER),
}
DEFAULT_MAX_TOKENS = {"short": 32, "long": 160, "list": 64}


def _turn(context: str, question: str) -> str:
    return f"Context:\n{context}\n\nQuestion: {question}\nAnswer:"


def completion_prompt(context: str, question: str, length: str = "short") -> str:
    instruction, example_context, example_question, example_answer = LENGTHS[length]
    return (f"{instruction}\n\n{_turn(example_context, example_question)} {example_answer}\n\n"
            f"{_turn(context, question)}")


def chat_messages(context: str, question: str, length: str = "short") -> list[Message]:
    instruction, example_context, example_question, example_answer = LENGTHS[length]
    return [
        {"role": "system", "content": instruction},
        {"role": "user", "content": _turn(example_context, example_question)},
        {"role": "assistant", "content": example_answer},
        {"role": "user", "content": _turn(context, question)},
    ]


def clean_answer(text: str) -> str:
    """First line, without a restated "Answer:" label or a trailing full stop."""
    line = text.strip().split("\n", 1)[0].strip()
    if line.lower().startswith("answer:"):
        line = line[len("answer:"):].strip()
    return line if line == INSUFFICIENT else line.rstrip(".").strip()


def clean_long_answer(text: str) -> str:
    """The first paragraph, whitespace collapsed, without a restated "Answer:" label."""
    paragraph = text.strip().split("\n\n", 1)[0]
    if paragraph.lower().startswith("answer:"):
        paragraph = paragraph[len("answer:"):]
    return " ".join(paragraph.split())


def clean_answer_lines(text: str) -> str:
    """The reply's leading ``ans:`` lines, one per line (the first other line ends them)."""
    lines = []
    for line in text.strip().splitlines():
        if not line.strip().lower().startswith("ans:"):
            break
        lines.append("ans: " + line.strip()[4:].strip())
    return "\n".join(lines)


def answer(llm: CachedLLM, context: str, question: str, *, max_tokens: int | None, style: str,
           length: str = "short") -> tuple[str, Completion]:
    """The cleaned answer and the completion it came from (for token accounting)."""
    max_tokens = max_tokens or DEFAULT_MAX_TOKENS[length]
    stop = ["\n"] if length == "short" else ["\n\n", "Question:"]
    if style == "chat":
        completion = llm.chat(chat_messages(context, question, length), max_tokens=max_tokens,
                              stop=stop)
    else:
        completion = llm.complete(completion_prompt(context, question, length),
                                  max_tokens=max_tokens, stop=stop)
    clean = {"short": clean_answer, "long": clean_long_answer, "list": clean_answer_lines}[length]
    return clean(completion.text), completion


MAX_CITATIONS = 3  # numbers an answer may cite: a short answer rests on a few passages
CITE_TOKENS = 16  # added to the answer's token budget for " [i][j][k]"
ANSWER_CHARS = {"short": 160, "long": 1200}  # the grammar's bound on the answer's text
_CITES = re.compile(r"\[\s*(\d+)\s*\]")
_LEADING = re.compile(r"^\s*(?:\[\s*\d+\s*\]\s*)+")
_TRAILING = re.compile(r"(?:\s*\[\s*\d+\s*\])+\s*\.?\s*$")


@dataclass(frozen=True)
class CitedAnswer:
    """An answer without its citation marks, and the unit numbers (1-based, each once,
    in the order cited) it cites among the ``shown`` units; ``numbers`` the cited numbers
    as written, valid or not."""

    text: str
    cited: list[int]
    numbers: list[int]


def numbered_context(units: Sequence[str]) -> str:
    """The context with each unit prefixed by its number, ``[1] # Title\ntext``."""
    return "\n\n".join(f"[{i}] {unit}" for i, unit in enumerate(units, 1))


def citation_grammar(shown: int, length: str) -> str:
    """GBNF: one to ``MAX_CITATIONS`` of the numbers 1 … ``shown``, then the answer's
    text (no bracket; a short answer ends at its line break); or the escape alone."""
    numbers = " | ".join(f'"{i}"' for i in range(shown, 0, -1))
    cites = min(MAX_CITATIONS, shown)
    chars = ANSWER_CHARS[length]
    text = (f'[^\\n\\[\\]]{{1,{chars}}} "\\n"?' if length == "short"
            else f"[^\\[\\]]{{1,{chars}}}")
    return (f'root ::= "{INSUFFICIENT}" | cite{{1,{cites}}} " " text\n'
            f'text ::= {text}\n'
            f'cite ::= "[" ({numbers}) "]"\n')


def parse_citations(reply: str, shown: int, length: str = "short") -> CitedAnswer:
    """The answer of a cited reply and the numbers its leading brackets cite (or, failing
    those, its trailing ones); numbers outside 1 … ``shown`` are kept in ``numbers`` but
    not cited."""
    first = reply.strip().split("\n", 1)[0] if length == "short" else reply.strip()
    marks = _LEADING.search(first) or _TRAILING.search(first)
    numbers = [int(n) for n in _CITES.findall(marks.group(0))] if marks else []
    body = first[:marks.start()] + first[marks.end():] if marks else first
    clean = clean_answer if length == "short" else clean_long_answer
    cited = list(dict.fromkeys(n for n in numbers if 1 <= n <= shown))
    return CitedAnswer(clean(body), cited, numbers)


def cited_answer(llm: CachedLLM, units: Sequence[str], question: str, *,
                 max_tokens: int | None, style: str, length: str = "short"
                 ) -> tuple[CitedAnswer, Completion]:
    """Answer from numbered units, citing them (see the module docstring)."""
    if length not in ANSWER_CHARS:
        raise KgragError(f"answer.cite needs answer.length short or long, not {length!r}: a "
                         "list answer's lines are each an answer of their own")
    if not units:  # nothing to cite: the escape is the only answer
        return CitedAnswer(INSUFFICIENT, [], []), Completion(INSUFFICIENT, 0, 0, cached=True)
    instruction, example_context, example_question, example_answer = LENGTHS[length]
    instruction += CITE_INSTRUCTION
    example = numbered_context(example_context.split("\n\n"))
    example_answer = f"[1][2] {example_answer}"
    context = numbered_context(units)
    max_tokens = (max_tokens or DEFAULT_MAX_TOKENS[length]) + CITE_TOKENS
    stop = ["\n"] if length == "short" else ["\n\n", "Question:"]
    grammar = citation_grammar(len(units), length)
    if style == "chat":
        messages: list[Message] = [
            {"role": "system", "content": instruction},
            {"role": "user", "content": _turn(example, example_question)},
            {"role": "assistant", "content": example_answer},
            {"role": "user", "content": _turn(context, question)}]
        completion = llm.chat(messages, max_tokens=max_tokens, stop=stop, grammar=grammar)
    else:
        prompt = (f"{instruction}\n\n{_turn(example, example_question)} {example_answer}\n\n"
                  f"{_turn(context, question)}")
        completion = llm.complete(prompt, max_tokens=max_tokens, stop=stop, grammar=grammar)
    return parse_citations(completion.text, len(units), length), completion
