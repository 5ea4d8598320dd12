"""RAS's Graph LLM (Jiang et al., App. C.2): a frozen causal LM that reads one graph soft
token, trained with LoRA on multitask (plan + answer) next-token prediction, on the CPU.

A sample's subgraphs go through the graph encoder (``kgrag.training.graph_llm.encoder``) to
one vector in the LLM's embedding space, placed as a soft token at the start of the
prompt's embeddings (after BOS where the model's tokenizer adds one). The prompt is
wrapped in the GGUF's chat template, the target follows it and ends with the end-of-turn
token; the loss is next-token cross-entropy on the target tokens only (prompt and soft
token labelled -100). The LLM's weights stay frozen; the encoder, the projector and LoRA
(on q_proj/v_proj) are trained with AdamW, a cosine schedule with linear warm-up and
gradient clipping, seeded: the same samples and settings give the same losses on one
machine.

A trained model's folder holds ``adapter/`` (peft), ``encoder.pt`` (encoder + projector),
and ``graph_llm.json`` (settings, the base GGUF's sha256, feature width, losses); loading
it needs the same base GGUF and an embedder of the same width, never the training data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.host import CpuShare, usable_cores
from kgrag.models.graph_llm import MODEL, CachedGraphLLM, read_identity
from kgrag.models.offline import offline
from kgrag.models.registry import file_sha256
from kgrag.models.served import model_file
from kgrag.training.gguf_llm import GgufTokenizer, load_causal_lm, load_tokenizer

if TYPE_CHECKING:  # the encoder imports torch, which takes seconds: only where it runs
    from kgrag.models import Models
    from kgrag.training.graph_llm.encoder import Graph

Triple = tuple[str, str, str]
Embed = Callable[[list[str]], np.ndarray]
IGNORE = -100  # the label of a position that is not scored
MANIFEST = "graph_llm.json"


@dataclass(frozen=True)
class Sample:
    """One multitask training sample."""

    prompt: str  # the instruction + history + question text (what the LLM reads)
    target: str  # "[SUBQ] q", "[SUFFICIENT]", "[NO_RETRIEVAL]" or an answer
    subgraphs: list[list[Triple]]  # the per-sub-query triples (empty list: no graph)


@dataclass(frozen=True)
class GraphLLMSettings:
    """Encoder, LoRA and optimiser settings. The authors' code defaults (3 Graph
    Transformer layers, 8 heads, dropout 0.1; LoRA r 8, α 16, dropout 0.05; clip 0.5) and
    the paper's (batch 2, accumulation 2, warm-up 0.15, weight decay 0.01, 2 epochs) except
    the encoder width, 256 instead of 1024 (to train on 2 CPU cores; the projector's middle
    layer is twice the width, as the authors' 1024 → 2048), and the learning rate, 1e-4
    instead of 1e-5 (a 135M model on thousands, not ~20k, samples)."""

    layers: int = 3
    hidden: int = 256
    heads: int = 8
    dropout: float = 0.1
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    learning_rate: float = 1e-4
    encoder_learning_rate: float | None = None  # None: ``learning_rate``
    epochs: int = 2
    batch_size: int = 2
    grad_accumulation: int = 2
    warmup_ratio: float = 0.15
    weight_decay: float = 0.01
    clip: float = 0.5
    seed: int = 0
    max_input_tokens: int = 1024
    max_target_tokens: int = 128


@dataclass(frozen=True)
class Encoded:
    """One sample as token ids: ``ids`` holds a placeholder at ``soft_at`` for the graph
    token; ``labels`` score only the target."""

    ids: list[int]
    labels: list[int]
    graphs: list[Graph]
    truncated: bool


def label_sequence(prompt_ids: list[int], target_ids: list[int],
                   soft_at: int) -> tuple[list[int], list[int]]:
    """The model's input ids (the soft token's slot inserted at ``soft_at`` as id 0, its
    embedding replaced later) and labels: -100 over the prompt and the soft token, the
    target's ids over the target."""
    ids = prompt_ids[:soft_at] + [0] + prompt_ids[soft_at:] + target_ids
    return ids, [IGNORE] * (len(prompt_ids) + 1) + target_ids


class Parts:
    """Tokenizer, LLM (with LoRA), graph encoder and the embedder's feature lookup."""

    def __init__(self, tokenizer: GgufTokenizer, llm: Any, encoder: Any, embed: Embed,
                 settings: GraphLLMSettings, width: int) -> None:
        self.tokenizer, self.llm, self.encoder, self.embed = tokenizer, llm, encoder, embed
        self.settings, self.width = settings, width
        self.before, self.after = tokenizer.wrap()
        # after a leading BOS (SmolLM2's template opens with it): the first position is
        # the attention sink, whose value the model learns to ignore
        self.soft_at = 1 if self.before[:1] == [tokenizer.bos_id] else 0

    def prompt_ids(self, prompt: str) -> tuple[list[int], bool]:
        """The templated prompt; a long one keeps the end of its text (the question)."""
        budget = self.settings.max_input_tokens - len(self.before) - len(self.after) - 1
        content = self.tokenizer.encode(prompt)
        kept = content[-budget:] if budget > 0 else []
        return self.before + kept + self.after, len(kept) < len(content)

    def encode(self, sample: Sample) -> Encoded:
        from kgrag.training.graph_llm.encoder import graph_of

        prompt, truncated = self.prompt_ids(sample.prompt)
        target = self.tokenizer.encode(sample.target)[:self.settings.max_target_tokens]
        ids, labels = label_sequence(prompt, target + [self.tokenizer.eos_id], self.soft_at)
        return Encoded(ids, labels, [graph_of(g) for g in sample.subgraphs], truncated)

    def features(self, graphs: Sequence[Graph]):
        """The embedder's vectors of every text of ``graphs`` and each text's row."""
        from kgrag.training.graph_llm.encoder import texts_of

        texts = texts_of(graphs)
        return feature_table(texts, self.embed(texts) if texts else None, self.width)

    def embeddings(self, batch: Sequence[Encoded], table, rows: dict[str, int]):
        """Input embeddings of right-padded ``batch`` with each soft token in place, the
        attention mask and the labels."""
        import torch

        from kgrag.training.graph_llm.encoder import batch_of

        tokens = self.encoder(batch_of([e.graphs for e in batch], rows), table)
        length = max(len(e.ids) for e in batch)
        pad = self.tokenizer.eos_id
        ids = torch.tensor([e.ids + [pad] * (length - len(e.ids)) for e in batch])
        mask = torch.tensor([[1] * len(e.ids) + [0] * (length - len(e.ids)) for e in batch])
        labels = torch.tensor([e.labels + [IGNORE] * (length - len(e.ids)) for e in batch])
        words = self.llm.get_input_embeddings()(ids)
        at = self.soft_at
        embeds = torch.cat([words[:, :at], tokens.unsqueeze(1).to(words.dtype),
                            words[:, at + 1:]], dim=1)
        return embeds, mask, labels

    def target_loss(self, batch: Sequence[Encoded], table, rows: dict[str, int]):
        """The next-token loss of ``batch``: the mean over all its target tokens, as the
        right-padded batched forward with labels gives it, computed a sample at a time
        (no padding) with the LM head only where a target token is predicted. A prompt
        runs to hundreds of tokens and a target to a dozen, so most of the batched work
        is padding and vocabulary logits that no label reads."""
        import torch

        model = self.llm.get_base_model()
        head = model.get_output_embeddings()
        total, count = None, 0
        for sample in batch:
            embeds, mask, labels = self.embeddings([sample], table, rows)
            hidden = model.model(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
            following = labels[0, 1:]  # position i predicts token i + 1
            where = (following != IGNORE).nonzero().squeeze(1)
            logits = head(hidden[0, where]).float()
            loss = torch.nn.functional.cross_entropy(logits, following[where], reduction="sum")
            total = loss if total is None else total + loss
            count += len(where)
        assert total is not None, "a batch holds at least one sample"
        return total / count


def feature_table(texts: list[str], vectors: Any, width: int):
    """The feature table (a tensor, one row per text) and each text's row."""
    import torch

    table = np.zeros((0, width), dtype=np.float32) if vectors is None else np.asarray(
        vectors, dtype=np.float32)[:len(texts)]
    if table.shape != (len(texts), width):
        raise KgragError(f"the embedder gives vectors of shape {table.shape} for "
                         f"{len(texts)} texts; the Graph LLM reads {width}-d vectors")
    return torch.from_numpy(np.ascontiguousarray(table)), {t: i for i, t in enumerate(texts)}


def build_parts(gguf_path: Path, embed: Embed, settings: GraphLLMSettings, width: int,
                adapter: Path | None = None) -> Parts:
    offline()
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model

    from kgrag.training.graph_llm.encoder import GraphEncoder

    tokenizer = load_tokenizer(gguf_path)
    llm = load_causal_lm(gguf_path)
    torch.manual_seed(settings.seed)  # LoRA's and the encoder's initial weights
    if adapter is None:
        llm = get_peft_model(llm, LoraConfig(
            r=settings.lora_r, lora_alpha=settings.lora_alpha,
            lora_dropout=settings.lora_dropout, target_modules=["q_proj", "v_proj"]))
    else:
        llm = PeftModel.from_pretrained(llm, str(adapter))
    encoder = GraphEncoder(width, settings.hidden, settings.layers, settings.heads,
                           settings.dropout, llm.get_input_embeddings().embedding_dim)
    return Parts(tokenizer, llm, encoder, embed, settings, width)


def free_cores() -> CpuShare:
    """The cores other processes leave free, for torch as for llama.cpp: a torch thread
    waiting on a descheduled one makes small operations many times slower."""
    return CpuShare(usable_cores())


@contextmanager
def torch_threads(count: int):
    """Run torch on ``count`` threads; the caller's count is restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


class GraphLLM:
    """A trained Graph LLM, loaded from its folder; greedy generation."""

    def __init__(self, parts: Parts, base_sha256: str, threads: int | None) -> None:
        self._parts = parts
        self.base_sha256 = base_sha256
        self.threads = threads
        self._share = free_cores()

    @classmethod
    def load(cls, folder: Path, gguf_path: Path, embed: Embed,
             threads: int | None = None) -> GraphLLM:
        """Load a trained model; KgragError when ``gguf_path`` is not the base it was
        trained on (its sha256 is recorded at training). ``threads`` fixes torch's thread
        count for generation; by default each call fits it to the free cores."""
        import torch

        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError) as exc:
            raise KgragError(f"{folder} holds no trained Graph LLM ({MANIFEST}: {exc})") from exc
        sha = file_sha256(gguf_path)
        if sha != manifest["base_sha256"]:
            raise KgragError(
                f"the Graph LLM in {folder} was trained on {manifest['base_file']} (sha256 "
                f"{manifest['base_sha256'][:12]}…), not on {gguf_path.name} ({sha[:12]}…)")
        settings = GraphLLMSettings(**manifest["settings"])
        parts = build_parts(gguf_path, embed, settings, manifest["feature_width"],
                            adapter=folder / "adapter")
        parts.encoder.load_state_dict(torch.load(folder / "encoder.pt", weights_only=True))
        parts.llm.eval()
        parts.encoder.eval()
        return cls(parts, sha, threads)

    def generate(self, prompt: str, subgraphs: list[list[Triple]], max_new_tokens: int) -> str:
        """Greedy continuation of ``prompt`` read with its graph token, up to the
        end-of-turn token or ``max_new_tokens``; deterministic."""
        import torch

        from kgrag.training.graph_llm.encoder import graph_of

        parts = self._parts
        prompt_ids, truncated = parts.prompt_ids(prompt)
        ids, labels = label_sequence(prompt_ids, [], parts.soft_at)
        sample = Encoded(ids, labels, [graph_of(g) for g in subgraphs], truncated)
        out: list[int] = []
        with torch.no_grad(), torch_threads(self.threads or self._share.threads()):
            table, rows = parts.features(sample.graphs)
            embeds, mask, _ = parts.embeddings([sample], table, rows)
            result = parts.llm(inputs_embeds=embeds, attention_mask=mask, use_cache=True,
                               logits_to_keep=1)
            for _ in range(max_new_tokens):
                token = int(result.logits[0, -1].argmax())
                if token == parts.tokenizer.eos_id:
                    break
                out.append(token)
                mask = torch.cat([mask, torch.ones(1, 1, dtype=mask.dtype)], dim=1)
                result = parts.llm(input_ids=torch.tensor([[token]]), attention_mask=mask,
                                   cache=result.cache, use_cache=True)
        return parts.tokenizer.decode(out)


def load_cached_graph_llm(folder: Path, models: Models) -> CachedGraphLLM:
    """The Graph-LLM a training step wrote into ``folder`` behind the spec's call cache,
    for the spec's ``models``: its base must be the spec's LLM, and it reads the embedder
    it was trained with (``kgrag.models.graph_llm``)."""
    identity = read_identity(folder)
    base = models.model("answerer")
    if identity["base_sha256"] != base.sha256:
        raise KgragError(f"the Graph-LLM in {folder} was trained on another base LLM (sha256 "
                         f"{identity['base_sha256'][:12]}…) than this spec's {base.name} "
                         f"({base.sha256[:12]}…); train it on models.llm, or name that LLM")
    embedder = models.embedder_of(identity["embedder"])

    def load() -> GraphLLM:
        return GraphLLM.load(folder / MODEL, model_file(base, "RAS's Graph-LLM"),
                             embedder.encode)

    return CachedGraphLLM(identity["fingerprint"], models.cache, load)
