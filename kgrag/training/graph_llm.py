"""RAS's Graph LLM (Jiang et al., App. C.2): a frozen causal LM that reads one graph soft
token, trained with LoRA on multitask (plan + answer) next-token prediction.

INTERFACE ONLY (first commit, for the strategy loop to code against); the bodies follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Sample:
    """One multitask training sample."""

    prompt: str  # the instruction + history + question text (what the LLM reads)
    target: str  # "[SUBQ] q", "[SUFFICIENT]", "[NO_RETRIEVAL]" or an answer
    subgraphs: list[list[Triple]]  # the per-sub-query triples (empty list: no graph)


@dataclass(frozen=True)
class GraphLLMSettings:
    """Graph encoder, LoRA and optimiser settings (authors' code defaults where CPU-feasible)."""

    layers: int = 3
    hidden: int = 256
    heads: int = 8
    dropout: float = 0.1
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    learning_rate: float = 1e-4
    epochs: int = 2
    batch_size: int = 2
    grad_accumulation: int = 2
    warmup_ratio: float = 0.15
    weight_decay: float = 0.01
    clip: float = 0.5
    seed: int = 0
    max_input_tokens: int = 1024
    max_target_tokens: int = 128


def train_graph_llm(samples: list[Sample], settings: GraphLLMSettings, gguf_path: Path,
                    embed: Callable[[list[str]], np.ndarray], out: Path) -> dict:
    """Train the graph encoder, projector and LoRA on ``samples`` over the GGUF at
    ``gguf_path``; save the model into ``out``; return the report (samples, tokens,
    per-step and per-epoch losses, wall seconds, peak RSS)."""
    raise NotImplementedError


class GraphLLM:
    """A trained Graph LLM, loaded from its folder; greedy generation."""

    base_sha256: str

    @classmethod
    def load(cls, folder: Path, gguf_path: Path,
             embed: Callable[[list[str]], np.ndarray]) -> GraphLLM:
        """Load a trained model; KgragError when ``gguf_path`` is not the base it was
        trained on (sha256 recorded at training)."""
        raise NotImplementedError

    def generate(self, prompt: str, subgraphs: list[list[Triple]], max_new_tokens: int) -> str:
        """Greedy, deterministic continuation of ``prompt`` with the graph token."""
        raise NotImplementedError
