"""Extraction: filtering of scripted model outputs, retries, cache replay, merging,
and one run of the real bundled Gemma on MuSiQue paragraphs."""

from __future__ import annotations

import json
import re

import pytest

from kgrag.graphs.elements import Entity, Extraction, ExtractionCounts, Relationship
from kgrag.graphs.extraction.llm import extract
from kgrag.graphs.extraction.prompt import (
    ENTITY_TYPES,
    EXAMPLES,
    extraction_schema,
    max_output_tokens,
)
from kgrag.graphs.merge import ENTITY_FRAME_SCHEMA, RELATIONSHIP_FRAME_SCHEMA, merge
from kgrag.graphs.names import is_grounded, normalise_name
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM
from tests.conftest import SHARED_DATA, RefusingBackend, ScriptedBackend, toy_llm

TEXT = ("Port Blair is the capital of the Andaman and Nicobar Islands, a union territory "
        "of India in the Bay of Bengal.")


def output(entities=(), relationships=()) -> str:
    """A model answer in the schema's shape; entities as (name, type, description),
    relationships as (source, target, description, strength)."""
    return json.dumps({
        "entities": [{"name": n, "type": t, "description": d} for n, t, d in entities],
        "relationships": [{"source": s, "target": t, "description": d, "strength": w}
                          for s, t, d, w in relationships],
    })


def run(cache: CallCache, *texts: str, text: str = TEXT, **kwargs) -> Extraction:
    return extract(toy_llm(cache, ScriptedBackend(*texts)), "c1", text, **kwargs)


def test_names_are_normalised_and_case_variants_merge(cache):
    x = run(cache, output([(" Port   Blair ", "geo", "Capital"), ("port blair", "geo", "City"),
                           ('"India"', "geo", "Country"), ("   ", "geo", "blank")]))
    assert [e.name for e in x.entities] == ["PORT BLAIR", "INDIA"]
    assert x.entities[0].description == "Capital; City"
    counts = x.counts
    assert (counts.entities_raw, counts.entities_duplicate, counts.entities_empty) == (4, 1, 1)
    assert normalise_name("ﬁji\u00a0 islands") == "FIJI ISLANDS"  # NFKC ligature and space


def test_types_are_lower_cased_and_unknown_ones_become_other(cache):
    x = run(cache, output([("India", "GEO", ""), ("Bay of Bengal", "ocean", "")]))
    assert [(e.name, e.type) for e in x.entities] == [("INDIA", "geo"), ("BAY OF BENGAL", "other")]


def test_a_repeated_other_entity_takes_the_specific_type(cache):
    x = run(cache, output([("India", "ocean", ""), ("India", "geo", "Country")]))
    assert [(e.type, e.description) for e in x.entities] == [("geo", "Country")]


def test_grounding_is_case_and_space_insensitive_and_whole_word():
    assert is_grounded("PORT BLAIR", "the town of port\n  blair")
    assert is_grounded("U.S.", "He moved to the U.S. in 1990.")
    assert not is_grounded("AN", "the Andaman Islands")
    assert not is_grounded("", TEXT)


def test_ungrounded_items_are_dropped_by_default_and_kept_on_request(cache):
    answer = output([("Port Blair", "geo", ""), ("Delhi", "geo", ""), ("India", "geo", "")],
                    [("Port Blair", "India", "In India", 8),
                     ("Port Blair", "Delhi", "Far from Delhi", 3)])
    default = run(cache, answer)
    assert [e.name for e in default.entities] == ["PORT BLAIR", "INDIA"]
    assert [(r.source, r.target) for r in default.relationships] == [("PORT BLAIR", "INDIA")]
    assert (default.counts.entities_ungrounded, default.counts.relationships_ungrounded) == (1, 1)

    kept = extract(toy_llm(cache, RefusingBackend()), "c1", TEXT,
                   keep_ungrounded=True)  # the same cached call, filtered differently
    assert [(e.name, e.grounded) for e in kept.entities] == [
        ("PORT BLAIR", True), ("DELHI", False), ("INDIA", True)]
    assert [r.grounded for r in kept.relationships] == [True, False]
    assert kept.counts == default.counts


def test_missing_endpoints_are_added_as_entities_then_grounded(cache):
    x = run(cache, output([("Port Blair", "geo", "Capital")],
                          [("Port Blair", "Andaman and Nicobar Islands", "Capital of", 9),
                           ("Port Blair", "Atlantis", "Invented", 5)]),
            keep_ungrounded=True)
    assert [(e.name, e.type, e.description, e.grounded) for e in x.entities] == [
        ("PORT BLAIR", "geo", "Capital", True),
        ("ANDAMAN AND NICOBAR ISLANDS", "other", "", True),
        ("ATLANTIS", "other", "", False)]
    assert x.counts.entities_implied == 2


def test_self_loops_dropped_and_duplicates_merged_in_either_direction(cache):
    x = run(cache, output([("Port Blair", "geo", ""), ("India", "geo", "")],
                          [("Port Blair", "port blair", "Itself", 5),
                           ("Port Blair", "India", "In India", 4),
                           ("Port Blair", "India", "In India", 4),
                           ("India", "Port Blair", "Has a town", 7),
                           ("", "India", "No source", 5)]))
    assert x.relationships == (
        Relationship("PORT BLAIR", "INDIA", "In India; Has a town", 7, True),)
    assert (x.counts.relationships_invalid, x.counts.relationships_duplicate) == (2, 2)


@pytest.mark.parametrize(("given", "kept"), [(0, 1), (-3, 1), (15, 10), (7.6, 8), (10, 10)])
def test_strength_is_rounded_and_clamped(cache, given, kept):
    x = run(cache, output([("India", "geo", ""), ("Bay of Bengal", "geo", "")],
                          [("India", "Bay of Bengal", "Borders", given)]))
    assert x.relationships[0].strength == kept


def test_invalid_json_is_retried_then_succeeds(cache):
    backend = ScriptedBackend('{"entities": [', output([("India", "geo", "Country")]))
    x = extract(toy_llm(cache, backend), "c1", TEXT)
    assert not x.failed and x.attempts == 2
    assert [e.name for e in x.entities] == ["INDIA"]
    assert [r["temperature"] for r in backend.requests] == [0.0, 0.3]


@pytest.mark.parametrize("bad", [
    '{"entities": "India", "relationships": []}',
    '{"entities": [], "relationships": [{"source": "India"}]}',
    '{"entities": [{"name": 3, "type": "geo", "description": ""}], "relationships": []}',
    '[]',
])
def test_wrong_structure_counts_as_invalid(cache, bad):
    x = run(cache, bad, output([("India", "geo", "")]))
    assert x.attempts == 2 and not x.failed


def test_all_attempts_invalid_give_a_failed_extraction_without_raising(cache):
    backend = ScriptedBackend("nonsense")
    x = extract(toy_llm(cache, backend), "c9", TEXT)
    assert x.failed and x.chunk_id == "c9"
    assert x.attempts == 3 == len(backend.requests)  # 1 + max_retries
    assert "JSONDecodeError" in x.error
    assert (x.entities, x.relationships, x.counts) == ((), (), ExtractionCounts())


def test_warm_replay_gives_identical_results_without_the_model(cache):
    answers = ("not json", output([("Port Blair", "geo", "Capital"), ("India", "geo", "")],
                                  [("Port Blair", "India", "In India", 8)]))
    cold = [run(cache, *answers), run(cache, "bad", text="Another chunk.")]
    warm_llm = toy_llm(cache, RefusingBackend())
    warm = [extract(warm_llm, "c1", TEXT), extract(warm_llm, "c1", "Another chunk.")]
    assert warm == cold
    assert cold[1].failed and warm_llm.usage.calls == 0 and warm_llm.usage.cache_hits == 5


def test_styles_send_a_prompt_or_chat_messages_with_the_schema(cache):
    backend = ScriptedBackend(output())
    llm = toy_llm(cache, backend)
    extract(llm, "c1", "Line one.\nLine  two.", max_entities=3, max_relationships=2)
    extract(llm, "c1", "Line one.\nLine  two.", style="chat", max_tokens=99)
    completion, chat = backend.requests
    assert completion["prompt"].endswith("Text: Line one. Line two.\nJSON: ")
    assert completion["json_schema"]["properties"]["entities"]["maxItems"] == 3
    assert completion["max_tokens"] == max_output_tokens(3, 2) < max_output_tokens()
    assert chat["max_tokens"] == 99
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant",
                                                     "user", "assistant", "user"]
    assert chat["messages"][-1]["content"] == "Text: Line one. Line two."
    assert chat["json_schema"] == extraction_schema()
    with pytest.raises(ValueError, match="unknown extraction style"):
        extract(llm, "c1", TEXT, style="poem")


def test_schema_compiles_to_a_grammar_that_bounds_the_output():
    from llama_cpp import LlamaGrammar

    schema = extraction_schema(3, 2)
    assert schema["properties"]["relationships"]["maxItems"] == 2
    entity = schema["properties"]["entities"]["items"]["properties"]
    assert entity["type"]["enum"] == list(ENTITY_TYPES)
    name = re.compile(entity["name"]["pattern"])
    assert name.match("Buechner & Orth") and name.match("x" * 60)
    # llama-cpp-python's maxLength strings admit raw newlines, which break JSON
    assert not any(name.match(bad) for bad in ("", "x" * 61, "a\nb", 'a"b', "a\\b"))
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


@pytest.mark.parametrize(("text", "answer"), EXAMPLES)
def test_few_shot_examples_pass_the_filters_unchanged(cache, text, answer):
    x = run(cache, json.dumps(answer), text=text)
    assert len(x.entities) == len(answer["entities"])
    assert len(x.relationships) == len(answer["relationships"])
    assert x.counts == ExtractionCounts(entities_raw=len(answer["entities"]),
                                        relationships_raw=len(answer["relationships"]))


def chunk(chunk_id: str, entities: list[Entity], relationships: list[Relationship]
          ) -> Extraction:
    return Extraction(chunk_id, tuple(entities), tuple(relationships), attempts=1)


def test_merge_combines_chunks_deterministically():
    paris_c2 = Entity("PARIS", "geo", "Capital", True)
    c2 = chunk("c2", [paris_c2, Entity("FRANCE", "geo", "Country", True)],
               [Relationship("FRANCE", "PARIS", "Has capital", 6, True)])
    c1 = chunk("c1", [Entity("PARIS", "organization", "City", True),
                      Entity("FRANCE", "other", "", True)],
               [Relationship("PARIS", "FRANCE", "Capital of", 9, True)])
    c3 = chunk("c3", [Entity("PARIS", "geo", "City; Capital", False),
                      Entity("SEINE", "geo", "River", False)],
               [Relationship("SEINE", "PARIS", "Flows through", 5, False)])
    failed = Extraction("c0", (), (), attempts=3, error="InvalidOutput")
    entities, relationships = merge([c3, c2, failed, c1])
    assert entities.to_dicts() == [
        {"name": "FRANCE", "type": "geo", "description": "Country",
         "source_chunk_ids": ["c1", "c2"], "grounded": True},
        {"name": "PARIS", "type": "geo", "description": "City; Capital",
         "source_chunk_ids": ["c1", "c2", "c3"], "grounded": True},
        {"name": "SEINE", "type": "geo", "description": "River",
         "source_chunk_ids": ["c3"], "grounded": False},
    ]
    assert relationships.to_dicts() == [
        {"source": "PARIS", "target": "FRANCE", "description": "Capital of; Has capital",
         "strength": 7.5, "weight": 15, "source_chunk_ids": ["c1", "c2"], "grounded": True},
        {"source": "SEINE", "target": "PARIS", "description": "Flows through",
         "strength": 5.0, "weight": 5, "source_chunk_ids": ["c3"], "grounded": False},
    ]
    assert merge([c1, c2, c3])[0].equals(merge([c3, c2, c1])[0])


def test_merge_type_ties_go_to_the_first_chunk_and_empty_input_keeps_the_schema():
    entities, _ = merge([chunk("b", [Entity("X", "person", "", True)], []),
                         chunk("a", [Entity("X", "work", "", True)], [])])
    assert entities["type"].to_list() == ["work"]
    empty_entities, empty_relationships = merge([])
    assert empty_entities.is_empty() and empty_relationships.is_empty()
    assert dict(empty_entities.schema) == ENTITY_FRAME_SCHEMA
    assert dict(empty_relationships.schema) == RELATIONSHIP_FRAME_SCHEMA


@pytest.mark.integration
def test_bundled_gemma_extracts_grounded_entities_from_musique(tmp_path):
    """The two shortest supporting paragraphs of the first questions; caps below the
    defaults keep it under a minute on a busy 2-core machine."""
    from kgrag.models.registry import resolve_llm

    paragraphs = []
    for line in (SHARED_DATA / "musique_200.jsonl").read_text().splitlines()[:10]:
        paragraphs += [p["paragraph_text"] for p in json.loads(line)["paragraphs"]
                       if p["is_supporting"]]
    shortest = sorted(paragraphs, key=len)[:2]
    model = resolve_llm("gemma3-270m")
    llm = CachedLLM(LLMSettings(name=model.name, path=model.path, sha256=model.sha256,
                                n_ctx=4096), CallCache(tmp_path / "calls"))
    results = [extract(llm, f"p{i}", text, max_entities=3, max_relationships=2)
               for i, text in enumerate(shortest)]
    assert not any(x.failed for x in results), [x.error for x in results]
    entities = [e for x in results for e in x.entities]
    assert entities and all(e.grounded for e in entities)
    assert llm.usage.tokens_out <= 2 * max_output_tokens(3, 2)  # caps bound the cost
