"""Hybrid extraction: the LLM relates the nlp step's entities, on scripted model outputs."""

from __future__ import annotations

import json

from kgrag.graphs.elements import Entity, Extraction, ExtractionCounts, Relationship
from kgrag.graphs.extraction.hybrid import (
    LLM_STRENGTH,
    MAX_OFFERED,
    chat_messages,
    completion_prompt,
    offered_names,
    relate,
    relation_schema,
)
from kgrag.models.cache import CallCache
from tests.conftest import RefusingBackend, ScriptedBackend, toy_llm

UNIT = ("# Free Guy\nFree Guy is a 2021 American film directed by Shawn Levy, "
        "with a story by Matt Lieberman.")
COOCCURRENCE = Relationship("FREE GUY", "MATT LIEBERMAN", "with a story by ...", 2, True)
DIRECTED = Relationship("FREE GUY", "SHAWN LEVY", "directed by: Free Guy is ...", 8, True)


def nlp(*names_and_types: tuple[str, str], relationships=(COOCCURRENCE, DIRECTED)
        ) -> Extraction:
    """An nlp extraction of ``UNIT`` with these (normalised name, type) entities."""
    entities = tuple(Entity(n, t, "a sentence", True) for n, t in names_and_types)
    return Extraction("c1", entities, tuple(relationships), attempts=1,
                      counts=ExtractionCounts(entities_raw=len(entities),
                                              relationships_raw=len(relationships)))


FOUND = nlp(("FREE GUY", "other"), ("FILM", "concept"), ("2021", "date"),
            ("SHAWN LEVY", "person"), ("MATT LIEBERMAN", "person"))


def run(cache: CallCache, extraction: Extraction, *outputs: str, **kwargs):
    backend = ScriptedBackend(*outputs)
    return relate(toy_llm(cache, backend), extraction, UNIT, **kwargs), backend


def test_the_llm_may_name_only_the_entities_found_as_written_named_ones_first() -> None:
    offered = offered_names(FOUND, UNIT)
    assert list(offered) == ["Free Guy", "2021", "Shawn Levy", "Matt Lieberman", "film"]
    assert offered["Shawn Levy"] == "SHAWN LEVY"
    schema = relation_schema(list(offered), 4)
    ends = schema["items"]["prefixItems"]
    assert ends[0] == ends[2] == {"enum": list(offered)} and schema["maxItems"] == 4
    many = nlp(*((f"NAME {k}", "person") for k in range(40)))
    assert len(offered_names(many, " ".join(f"name {k}" for k in range(40)))) == MAX_OFFERED
    quoted = nlp(('SAY "HI"', "work"), ("FREE GUY", "other"))
    assert list(offered_names(quoted, UNIT)) == ["Free Guy"]


def test_the_prompts_end_with_the_chunk_and_its_entities() -> None:
    names = ["Free Guy", "Shawn Levy"]
    prompt = completion_prompt(UNIT, names)
    assert prompt.endswith("Text: # Free Guy Free Guy is a 2021 American film directed by "
                           "Shawn Levy, with a story by Matt Lieberman.\n"
                           "Entities: Free Guy; Shawn Levy\nJSON: ")
    messages = chat_messages(UNIT, names)
    assert messages[-1]["content"] == prompt.rsplit("\n\n", 1)[1].removesuffix("\nJSON: ")
    assert json.loads(messages[2]["content"])[0] == ["Eiffel Tower", "stands on", "Champ de Mars"]


def test_llm_relationships_come_first_and_the_nlp_ones_stay(cache) -> None:
    answer = json.dumps([["Shawn Levy", "directed", "Free Guy"],
                         ["Free Guy", "released in", "2021"],
                         ["Free Guy", "released", "2021"],
                         ["film", "is", "film"]])
    related, backend = run(cache, FOUND, answer, style="chat")
    assert related.outcome == "related" and len(backend.requests) == 1
    assert "messages" in backend.requests[0]
    got = {frozenset((r.source, r.target)): r for r in related.extraction.relationships}
    assert len(got) == 3
    directed = got[frozenset(("FREE GUY", "SHAWN LEVY"))]
    assert (directed.source, directed.strength) == ("SHAWN LEVY", LLM_STRENGTH)
    assert directed.description == "directed; directed by: Free Guy is ..."
    assert got[frozenset(("FREE GUY", "2021"))].description == "released in; released"
    assert got[frozenset(("FREE GUY", "MATT LIEBERMAN"))] == COOCCURRENCE
    assert related.extraction.entities == FOUND.entities
    counts = related.extraction.counts
    assert (counts.relationships_raw, counts.relationships_invalid,
            counts.relationships_duplicate) == (6, 1, 2)
    kept = counts.relationships_raw - counts.relationships_invalid - counts.relationships_duplicate
    assert kept == len(related.extraction.relationships)


def test_a_chunk_with_fewer_than_two_entities_gets_no_call(cache) -> None:
    alone = nlp(("FREE GUY", "other"), relationships=())
    related = relate(toy_llm(cache, RefusingBackend()), alone, UNIT)
    assert related.outcome == "no_entities" and related.extraction == alone


def test_a_call_that_relates_no_two_known_entities_keeps_the_nlp_extraction(cache) -> None:
    related, _ = run(cache, FOUND, json.dumps([["Free Guy", "is", "Free Guy"],
                                               ["Paris", "in", "France"]]))
    assert related.outcome == "unrelated"
    assert related.extraction.relationships == FOUND.relationships
    assert related.extraction.counts.relationships_invalid == 2


def test_output_invalid_on_every_attempt_loses_nothing(cache) -> None:
    related, backend = run(cache, FOUND, '{"relationships": []}', '[["Free Guy"]]', "[")
    assert related.outcome == "failed" and len(backend.requests) == 3
    assert related.extraction.error is None and related.extraction.attempts == 3
    assert related.extraction.entities == FOUND.entities
    assert related.extraction.relationships == FOUND.relationships


def test_a_warm_rerun_replays_the_call_from_the_cache(cache) -> None:
    answer = json.dumps([["Shawn Levy", "directed", "Free Guy"]])
    first, _ = run(cache, FOUND, answer)
    again = relate(toy_llm(cache, RefusingBackend()), FOUND, UNIT)
    assert again == first
