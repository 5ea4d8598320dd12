"""A GGUF as a trainable PyTorch causal LM, on the CPU.

transformers reads the weights (through the ``gguf`` package) into a float32 model;
llama.cpp's own vocabulary (a vocab-only ``llama_cpp.Llama``) tokenizes, exactly as the
spec's llama.cpp LLM does, and holds the chat template. The model computes what llama.cpp
computes (checked against it in tests/training/test_graph_llm.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.errors import KgragError
from kgrag.models.offline import offline

SENTINEL = "\x00CONTENT\x00"


@dataclass
class GgufTokenizer:
    """The GGUF's own vocabulary (llama.cpp) and chat template."""

    vocab: Any  # a vocab-only llama_cpp.Llama
    bos_id: int
    eos_id: int
    add_bos: bool
    template: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token markup (``<|im_end|>``) becomes its token."""
        return self.vocab.tokenize(text.encode(), add_bos=False, special=True) if text else []

    def decode(self, ids: list[int]) -> str:
        return self.vocab.detokenize(ids).decode("utf-8", errors="replace")

    def wrap(self) -> tuple[list[int], list[int]]:
        """The ids before and after a user message's content, ending where the assistant's
        turn begins (the chat template, or BOS alone where the file has none)."""
        start = [self.bos_id] if self.add_bos else []
        if not self.template:
            return start, []
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        text = env.from_string(self.template).render(
            messages=[{"role": "user", "content": SENTINEL}], add_generation_prompt=True,
            bos_token=self.decode([self.bos_id]), eos_token=self.decode([self.eos_id]))
        before, after = text.split(SENTINEL)
        before_ids = self.encode(before)
        if self.add_bos and before_ids[:1] != [self.bos_id]:
            before_ids = start + before_ids
        return before_ids, self.encode(after)


def load_tokenizer(path: Path) -> GgufTokenizer:
    from llama_cpp import Llama

    vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    meta = vocab.metadata
    return GgufTokenizer(vocab, vocab.token_bos(), vocab.token_eos(),
                         meta.get("tokenizer.ggml.add_bos_token", "false") == "true",
                         meta.get("tokenizer.chat_template", ""))


def load_causal_lm(path: Path):
    """A float32 transformers causal LM holding the GGUF's weights, dequantized by
    transformers' own GGUF reader (any architecture it maps: SmolLM2's LLaMA, Gemma 3…)."""
    offline()
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                     dtype=torch.float32)
    except (ValueError, KeyError, OSError) as exc:
        raise KgragError(f"{path.name}: transformers cannot load this GGUF as a causal LM "
                         f"({exc})") from None
    model.eval().requires_grad_(False)
    return model
