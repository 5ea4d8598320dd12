"""Short-answer generation from a retrieved context.

The prompt follows KET-RAG's released answer prompt in spirit: context as
data, the shortest possible answer, and an explicit "Insufficient
information." escape so a model is not pushed into guessing. One worked
example shows the expected length, which small models need.

Two lengths: ``short`` (the multi-hop benchmarks' entity answers) and ``long``
(HolisQA's few-sentence answers, scored by token F1 against a long gold answer:
"two to four sentences", one worked example of that length, no stop at a line
break).

Two renderings of each prompt: ``completion`` (plain few-shot text, the
default: the bundled Gemma 3 270M ships without a chat template and answers
far better this way, and SmolLM2 does too — see README) and ``chat`` (the
model's chat template, for instruction-tuned models given by path).
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
LENGTHS = {
    "short": (INSTRUCTION, EXAMPLE_CONTEXT, EXAMPLE_QUESTION, EXAMPLE_ANSWER),
    "long": (LONG_INSTRUCTION, LONG_EXAMPLE_CONTEXT, LONG_EXAMPLE_QUESTION, LONG_EXAMPLE_ANSWER),
}
DEFAULT_MAX_TOKENS = {"short": 32, "long": 160}


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
    clean = clean_answer if length == "short" else clean_long_answer
    return clean(completion.text), completion
