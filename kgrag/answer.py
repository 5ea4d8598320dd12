"""Short-answer generation from a retrieved context.

The prompt follows KET-RAG's released answer prompt in spirit: context as
data, the shortest possible answer, and an explicit "Insufficient
information." escape so a model is not pushed into guessing. One worked
example shows the expected length, which small models need.

Two renderings of the same prompt: ``completion`` (plain few-shot text, the
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


def _turn(context: str, question: str) -> str:
    return f"Context:\n{context}\n\nQuestion: {question}\nAnswer:"


def completion_prompt(context: str, question: str) -> str:
    return (f"{INSTRUCTION}\n\n{_turn(EXAMPLE_CONTEXT, EXAMPLE_QUESTION)} {EXAMPLE_ANSWER}\n\n"
            f"{_turn(context, question)}")


def chat_messages(context: str, question: str) -> list[Message]:
    return [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": _turn(EXAMPLE_CONTEXT, EXAMPLE_QUESTION)},
        {"role": "assistant", "content": EXAMPLE_ANSWER},
        {"role": "user", "content": _turn(context, question)},
    ]


def clean_answer(text: str) -> str:
    """First line, without a restated "Answer:" label or a trailing full stop."""
    line = text.strip().split("\n", 1)[0].strip()
    if line.lower().startswith("answer:"):
        line = line[len("answer:"):].strip()
    return line if line == INSUFFICIENT else line.rstrip(".").strip()


def answer(llm: CachedLLM, context: str, question: str, *, max_tokens: int, style: str
           ) -> tuple[str, Completion]:
    """The cleaned short answer and the completion it came from (for token accounting)."""
    if style == "chat":
        completion = llm.chat(chat_messages(context, question), max_tokens=max_tokens,
                              stop=["\n"])
    else:
        completion = llm.complete(completion_prompt(context, question), max_tokens=max_tokens,
                                  stop=["\n"])
    return clean_answer(completion.text), completion
