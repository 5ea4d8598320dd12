"""Greedy-first grammar checking on the real SmolLM2: the same constrained outputs as
llama-cpp-python's full mask, for LLM and hybrid extraction requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag.graphs.extraction import hybrid as hybrid_extraction
from kgrag.graphs.extraction import prompt as extraction_prompt
from kgrag.models.backend import FIXED_SAMPLING, LLMSettings
from kgrag.models.cache import request_key
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.registry import resolve_llm
from tests.conftest import SHARED_DATA


def requests() -> list[dict]:
    """Two extraction requests and one hybrid request on MuSiQue paragraphs."""
    question = json.loads((SHARED_DATA / "musique_200.jsonl").open().readline())
    texts = [f"# {p['title']}\n{p['paragraph_text']}" for p in question["paragraphs"][:2]]
    common = {"temperature": 0.0, "top_p": 1.0, "seed": 0, "stop": None, "grammar": None,
              **FIXED_SAMPLING}
    out = [{"messages": extraction_prompt.chat_messages(t),
            "json_schema": extraction_prompt.extraction_schema(),
            "max_tokens": extraction_prompt.max_output_tokens(), **common} for t in texts]
    names = ["Port Blair", "Andaman and Nicobar Islands", "India"]
    out.append({"prompt": hybrid_extraction.completion_prompt(texts[0], names),
                "json_schema": hybrid_extraction.relation_schema(names, 4),
                "max_tokens": 300, **common})
    return out


@pytest.mark.integration
def test_greedy_first_decodes_what_the_full_mask_decodes() -> None:
    model = resolve_llm("smollm2-135m")
    settings = LLMSettings(name=model.name, path=Path(model.path), sha256=model.sha256,
                           n_ctx=4096)
    full, greedy = LlamaCppBackend(settings, greedy_first=False), LlamaCppBackend(settings)
    for request in requests():
        expected = full.generate(request)
        got = greedy.generate(request)
        assert (got.text, got.tokens_out) == (expected.text, expected.tokens_out), \
            request_key("llm", request)
        json.loads(got.text)
