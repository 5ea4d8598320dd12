"""llama.cpp's own messages on the real Gemma 3 270M: none reach stderr (``kgrag query``
printed llama.cpp's warning about its sliding-window cache between the evidence and the
answer), its warnings go to kgrag's log at DEBUG, for ``--verbose``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kgrag.models.backend import FIXED_SAMPLING, LLMSettings
from kgrag.models.llamacpp import LlamaCppBackend
from kgrag.models.registry import resolve_llm


@pytest.mark.integration
def test_llama_cpp_writes_nothing_to_stderr_and_logs_its_warnings(capfd, caplog) -> None:
    model = resolve_llm("gemma3-270m")  # a sliding-window model: llama.cpp warns on load
    backend = LlamaCppBackend(LLMSettings(name=model.name, path=Path(model.path),
                                          sha256=model.sha256, n_ctx=512))
    with caplog.at_level(logging.DEBUG, logger="kgrag.models.llamacpp"):
        reply = backend.generate({"prompt": "The capital of France is", "max_tokens": 2,
                                  "temperature": 0.0, "top_p": 1.0, "seed": 0, "stop": None,
                                  **FIXED_SAMPLING})
    assert reply.tokens_out >= 1
    out, err = capfd.readouterr()
    assert "llama" not in out + err, out + err
    from_llama = [r for r in caplog.records if r.getMessage().startswith("llama.cpp: ")]
    assert from_llama and all(r.levelno == logging.DEBUG for r in from_llama)
