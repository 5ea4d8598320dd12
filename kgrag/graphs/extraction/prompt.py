"""The LLM extraction prompt: entity types, per-chunk caps, the JSON schema the grammar
enforces, and the few-shot examples, as plain text for base models or as chat turns.

The model fills the schema per chunk: entities (name, type, description) and
relationships (source, target, description, strength 1–10). Names are asked for as
written in the text (copying is what small models do best, and upper-case names cost
1.6x (Gemma) to 2.2x (SmolLM2) the tokens); ``kgrag.graphs.names`` normalises them
afterwards. The chunk text is put on one line (whitespace collapsed), because the
few-shot format is one ``Text:`` line and one ``JSON:`` line per example.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from kgrag.graphs.names import MAX_NAME_CHARS, clean
from kgrag.models.llm import Message

Style = Literal["completion", "chat"]

# GraphRAG's default types (organization, person, geo, event) plus the kinds that
# Wikipedia-style and biomedical text are full of; "other" absorbs the rest.
ENTITY_TYPES = ("organization", "person", "geo", "event", "work", "date", "concept",
                "biomedical", "other")
# Per-chunk caps. Measured on 8 MuSiQue paragraphs, the bundled models keep about
# 2 grounded entities and 0.5 grounded relationships per paragraph whether the caps
# are 4, 6 or 8: they fill the remaining slots by repeating their last item. Every
# slot costs tokens, so the defaults are small; a larger model on longer chunks
# should raise them (``extract``'s max_entities / max_relationships).
MAX_ENTITIES = 4
MAX_RELATIONSHIPS = 4
MAX_DESCRIPTION_CHARS = 80
# The fields of one output item, in the order the grammar writes them.
ENTITY_FIELDS = ("name", "type", "description")
RELATIONSHIP_FIELDS = ("source", "target", "description", "strength")


def text_field(min_chars: int, max_chars: int) -> dict[str, Any]:
    """A bounded string of plain characters, written as a pattern on purpose.

    llama-cpp-python's schema-to-grammar converter lets a ``maxLength`` string hold
    raw control characters, so a model could emit a literal newline inside a string
    and the output would not parse (seen with Gemma 270M). The pattern excludes
    control characters, quotes and backslashes, so every output is valid JSON.
    """
    return {"type": "string", "pattern": rf'^[^"\\\x00-\x1f]{{{min_chars},{max_chars}}}$'}


_NAME = text_field(1, MAX_NAME_CHARS)
_STRING = text_field(0, MAX_DESCRIPTION_CHARS)


def extraction_schema(max_entities: int = MAX_ENTITIES,
                      max_relationships: int = MAX_RELATIONSHIPS) -> dict[str, Any]:
    """The JSON schema of one chunk's output, which the grammar enforces token by token.

    The item caps bound the cost: the small models tend to repeat their last item
    until a list is full, so every slot allowed is paid for. llama.cpp's
    schema-to-grammar conversion ignores minimum/maximum, so the strength range is
    an enum: the grammar can then only emit 1..10.
    """
    return {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array", "maxItems": max_entities,
                "items": {
                    "type": "object",
                    "properties": {"name": _NAME, "type": {"enum": list(ENTITY_TYPES)},
                                   "description": _STRING},
                    "required": list(ENTITY_FIELDS), "additionalProperties": False,
                },
            },
            "relationships": {
                "type": "array", "maxItems": max_relationships,
                "items": {
                    "type": "object",
                    "properties": {"source": _NAME, "target": _NAME, "description": _STRING,
                                   "strength": {"type": "integer", "enum": list(range(1, 11))}},
                    "required": list(RELATIONSHIP_FIELDS),
                    "additionalProperties": False,
                },
            },
        },
        "required": ["entities", "relationships"],
        "additionalProperties": False,
    }


INSTRUCTION = (
    "Extract the named entities of the text and the relationships between them. "
    f"Entity types: {', '.join(ENTITY_TYPES)}. Copy every name exactly as it is written "
    "in the text. Describe each entity and relationship in a few words, using only "
    "facts from the text. Strength is how strongly the text links the two entities, "
    "from 1 (weak) to 10 (explicit). Answer with JSON only."
)


def _example(text: str, entities: Iterable[tuple[str, str, str]],
             relationships: Iterable[tuple[str, str, str, int]]) -> tuple[str, dict[str, Any]]:
    """One example as (text, the output it should give), from rows of field values."""
    return text, {
        "entities": [dict(zip(ENTITY_FIELDS, row, strict=True)) for row in entities],
        "relationships": [dict(zip(RELATIONSHIP_FIELDS, row, strict=True))
                          for row in relationships],
    }


# Few-shot examples: short, real facts, Wikipedia-like, with every name copied from
# the text (tests check that they pass the extraction's own filters unchanged). They
# list more items than the default caps on purpose, to show every common type; the
# grammar closes each list at its cap (that is how the caps were measured).
EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    _example(
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, "
        "France. It is named after the engineer Gustave Eiffel, whose company designed "
        "and built the tower for the 1889 World's Fair.",
        [("Eiffel Tower", "geo", "Wrought-iron lattice tower in Paris"),
         ("Champ de Mars", "geo", "Place in Paris where the tower stands"),
         ("Paris", "geo", "City in France"),
         ("France", "geo", "Country of Paris"),
         ("Gustave Eiffel", "person", "Engineer whose company built the tower"),
         ("1889 World's Fair", "event", "Exhibition the tower was built for")],
        [("Eiffel Tower", "Champ de Mars", "The tower stands on the Champ de Mars", 9),
         ("Champ de Mars", "Paris", "The Champ de Mars is in Paris", 7),
         ("Paris", "France", "Paris is in France", 6),
         ("Eiffel Tower", "Gustave Eiffel", "Named after Eiffel, whose company built it", 10),
         ("Eiffel Tower", "1889 World's Fair", "Built for the 1889 World's Fair", 8)],
    ),
    _example(
        "Penicillin was discovered in 1928 by the Scottish physician Alexander Fleming at "
        "St Mary's Hospital in London. Fleming shared the 1945 Nobel Prize in Physiology "
        "or Medicine with Howard Florey, who developed it into a medicine.",
        [("Penicillin", "biomedical", "Substance discovered by Fleming in 1928"),
         ("1928", "date", "Year penicillin was discovered"),
         ("Alexander Fleming", "person", "Scottish physician who discovered penicillin"),
         ("St Mary's Hospital", "organization", "Hospital in London"),
         ("London", "geo", "City of St Mary's Hospital"),
         ("Nobel Prize in Physiology or Medicine", "other",
          "Prize Fleming and Florey shared in 1945"),
         ("Howard Florey", "person", "Developed penicillin into a medicine")],
        [("Alexander Fleming", "Penicillin", "Fleming discovered penicillin", 10),
         ("Penicillin", "1928", "Penicillin was discovered in 1928", 7),
         ("Alexander Fleming", "St Mary's Hospital", "Fleming made the discovery at St Mary's", 6),
         ("St Mary's Hospital", "London", "The hospital is in London", 7),
         ("Howard Florey", "Penicillin", "Florey developed penicillin into a medicine", 8),
         ("Alexander Fleming", "Nobel Prize in Physiology or Medicine",
          "Fleming shared the 1945 prize", 8),
         ("Howard Florey", "Nobel Prize in Physiology or Medicine",
          "Florey shared the 1945 prize", 8)],
    ),
)


def render_json(value: Any) -> str:
    """Compact JSON, the exact shape the grammar produces, so examples cost few tokens."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def completion_prompt(text: str) -> str:
    """The few-shot prompt as plain text, for base models without a chat template.

    It ends right where the JSON should start, so the grammar-constrained
    continuation is the answer.
    """
    shots = "".join(f"Text: {t}\nJSON: {render_json(out)}\n\n" for t, out in EXAMPLES)
    return f"{INSTRUCTION}\n\n{shots}Text: {clean(text)}\nJSON: "


def chat_messages(text: str) -> list[Message]:
    """The few-shot prompt as chat turns, for instruction-tuned models."""
    messages: list[Message] = [{"role": "system", "content": INSTRUCTION}]
    for example_text, out in EXAMPLES:
        messages.append({"role": "user", "content": f"Text: {example_text}"})
        messages.append({"role": "assistant", "content": render_json(out)})
    messages.append({"role": "user", "content": f"Text: {clean(text)}"})
    return messages


def max_output_tokens(max_entities: int = MAX_ENTITIES,
                      max_relationships: int = MAX_RELATIONSHIPS) -> int:
    """A ``max_tokens`` that a schema-bounded output cannot reach.

    At the length limits an entity is at most 39 tokens and a relationship 54 with
    either bundled tokenizer (plain English); half as much again covers denser
    text. An output cut off by ``max_tokens`` could not parse, so this must not bind.
    """
    return 16 + 60 * max_entities + 80 * max_relationships

