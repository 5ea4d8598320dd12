"""Hybrid extraction: spaCy finds a chunk's entities, the LLM only relates them.

Why: the LLM path asks a 135M model to find names, type and describe them, and relate
them, all in one output of a few hundred tokens; it keeps few entities per chunk and
rarely finds both ends of a 2Wiki gold triple. The nlp path finds the entities well
but labels a relationship only where the dependency parse
has a verb or a noun with its preposition. Here the nlp extraction is kept whole and
one constrained LLM call per chunk writes ``[source, relation, target]`` triples whose
source and target are enums of the entities found, so every triple is grounded by
construction and the output is a few short arrays.

Decisions:

* The entities offered are the chunk's named entities first (the title, then in the
  order the nlp step found them), then its noun-chunk concepts, at most
  ``MAX_OFFERED``: every offered name costs prompt tokens and grammar alternatives.
  Each is offered as written in the unit (the model copies text best; upper-case
  names cost SmolLM2 twice the tokens) and mapped back to its normalised name.
* The LLM's relationships come first, strength ``LLM_STRENGTH`` and the relation
  words as description; the nlp relationships are then added as on the nlp path, so
  a pair both name keeps the LLM's orientation, both descriptions and the higher
  strength, and a pair the LLM left out keeps its nlp relation or co-occurrence
  edge. On 2Wiki paragraphs with SmolLM2, the LLM's relationships alone recall
  few of the gold triples and the nlp ones beside them most (docs/results.md,
  "Extraction at corpus scale").
* Bad input is recorded, never an error: a chunk with fewer than two entities gets
  no call (``no_entities``); a call whose triples name no two distinct known
  entities, or that fails validation on every attempt, leaves the nlp extraction as
  it is (``unrelated`` / ``failed``). The chunk keeps its entities either way.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Literal

from kgrag.graphs.elements import Extraction, Relationship
from kgrag.graphs.extraction.prompt import (
    EXAMPLES,
    MAX_RELATIONSHIPS,
    Style,
    render_json,
    text_field,
)
from kgrag.graphs.merge import add_relationship
from kgrag.graphs.names import single_spaces
from kgrag.models.llm import CachedLLM, InvalidOutput, Message

HYBRID_VERSION = "1"  # bump when the prompt, the schema or the merge rules change
MAX_OFFERED = 24
MAX_RELATION_CHARS = 40
LLM_STRENGTH = 9
# At most 24 tokens per name and 14 per relation words with SmolLM2's tokenizer, plus
# the brackets, quotes and commas of one triple; a cut-off output could not parse.
TRIPLE_TOKENS = 72

Outcome = Literal["related", "no_entities", "unrelated", "failed"]

INSTRUCTION = (
    "List the facts the text states between the listed entities, as JSON triples "
    "[source, relation, target]. The relation is a few words from the text, such as "
    '"directed by" or "born in". Use only the listed entities.'
)

# One example: the first few-shot text of the LLM path, its entities as spaCy would
# offer them, and the facts among them.
EXAMPLE_TEXT = EXAMPLES[0][0]
EXAMPLE_ENTITIES = ("Eiffel Tower", "Champ de Mars", "Paris", "France", "Gustave Eiffel",
                    "1889 World's Fair", "engineer")
EXAMPLE_TRIPLES = (("Eiffel Tower", "stands on", "Champ de Mars"),
                   ("Champ de Mars", "in", "Paris"), ("Paris", "in", "France"),
                   ("Eiffel Tower", "named after", "Gustave Eiffel"),
                   ("Eiffel Tower", "built for", "1889 World's Fair"))


def relation_schema(names: list[str], max_relationships: int) -> dict[str, Any]:
    """A JSON array of at most ``max_relationships`` triples whose ends are ``names``."""
    name = {"enum": names}
    return {"type": "array", "maxItems": max_relationships,
            "items": {"type": "array",
                      "prefixItems": [name, text_field(1, MAX_RELATION_CHARS), name]}}


def _question(text: str, names: list[str] | tuple[str, ...]) -> str:
    return f"Text: {single_spaces(text)}\nEntities: {'; '.join(names)}"


def _answer(triples: tuple[tuple[str, str, str], ...]) -> str:
    return render_json([list(t) for t in triples])


def chat_messages(text: str, names: list[str]) -> list[Message]:
    """The prompt as chat turns; the chunk comes last, so every chunk shares the rest."""
    return [{"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": _question(EXAMPLE_TEXT, EXAMPLE_ENTITIES)},
            {"role": "assistant", "content": _answer(EXAMPLE_TRIPLES)},
            {"role": "user", "content": _question(text, names)}]


def completion_prompt(text: str, names: list[str]) -> str:
    """The prompt as plain text for base models, ending where the JSON starts."""
    return (f"{INSTRUCTION}\n\n{_question(EXAMPLE_TEXT, EXAMPLE_ENTITIES)}\n"
            f"JSON: {_answer(EXAMPLE_TRIPLES)}\n\n{_question(text, names)}\nJSON: ")


def offered_names(extraction: Extraction, text: str) -> dict[str, str]:
    """Surface form in ``text`` → normalised name, for the entities the LLM may name:
    named entities before concepts, at most ``MAX_OFFERED``. A name that does not
    occur as written (a title with its parenthesis dropped) is offered as it is. Names
    holding a quote or backslash are left out: llama-cpp-python's grammar converter
    escapes them wrongly."""
    ranked = sorted(extraction.entities, key=lambda e: e.type == "concept")
    cleaned = single_spaces(text)
    offered: dict[str, str] = {}
    for entity in ranked:
        if len(offered) == MAX_OFFERED:
            break
        if '"' in entity.name or "\\" in entity.name:
            continue
        found = re.search(rf"(?<!\w){re.escape(entity.name)}(?!\w)", cleaned, re.IGNORECASE)
        offered.setdefault(found.group(0) if found else entity.name, entity.name)
    return offered


@dataclass(frozen=True)
class Related:
    """One chunk's hybrid extraction and what happened to its call."""

    extraction: Extraction
    outcome: Outcome


def relate(llm: CachedLLM, nlp: Extraction, text: str, *, style: Style = "completion",
           max_relationships: int = MAX_RELATIONSHIPS) -> Related:
    """The chunk's nlp extraction with the LLM's relationships among its entities first.

    ``text`` is what the LLM reads (the retrieval unit, title line included). Never
    raises on model output: see the module docstring for each recorded outcome.
    """
    offered = offered_names(nlp, text)
    if len(set(offered.values())) < 2:
        return Related(nlp, "no_entities")
    names = list(offered)
    schema = relation_schema(names, max_relationships)

    def validate(obj: Any) -> list[tuple[str, str, str]]:
        if not isinstance(obj, list):
            raise TypeError(f"expected a JSON array, got {type(obj).__name__}")
        if not all(isinstance(t, list) and len(t) == 3 and all(isinstance(v, str) for v in t)
                   for t in obj):
            raise TypeError("expected [source, relation, target] triples of strings")
        return [tuple(t) for t in obj]

    max_tokens = 8 + TRIPLE_TOKENS * max_relationships
    try:
        if style == "chat":
            triples, attempts = llm.chat_json(chat_messages(text, names), schema,
                                              max_tokens=max_tokens, validate=validate)
        else:
            triples, attempts = llm.complete_json(completion_prompt(text, names), schema,
                                                  max_tokens=max_tokens, validate=validate)
    except InvalidOutput as exc:
        return Related(replace(nlp, attempts=len(exc.errors)), "failed")
    counts: Counter[str] = Counter()
    relationships: dict[frozenset[str], Relationship] = {}
    for source, relation, target in triples:
        head, tail = offered.get(source), offered.get(target)
        if head is None or tail is None or head == tail:
            counts["relationships_invalid"] += 1
            continue
        add_relationship(relationships, Relationship(
            head, tail, single_spaces(relation), LLM_STRENGTH, True), counts)
    outcome: Outcome = "related" if relationships else "unrelated"
    for relationship in nlp.relationships:
        add_relationship(relationships, relationship, counts)
    base = nlp.counts
    merged = replace(
        base, relationships_raw=base.relationships_raw + len(triples),
        relationships_invalid=base.relationships_invalid + counts["relationships_invalid"],
        relationships_duplicate=base.relationships_duplicate
        + counts["relationships_duplicate"])
    return Related(Extraction(nlp.chunk_id, nlp.entities, tuple(relationships.values()),
                              attempts, merged), outcome)
