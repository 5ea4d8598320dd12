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

Two renderings of each prompt: ``completion`` (plain few-shot text, the
default: the bundled Gemma 3 270M ships without a chat template and answers
far better this way, and SmolLM2 does too — see docs/results.md, "Which bundled
LLM is the default") and ``chat`` (the model's chat template, for instruction-tuned
models given by path).
"""

from __future__ import annotations

from kgrag.models.llm import CachedLLM, Completion, Message

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
