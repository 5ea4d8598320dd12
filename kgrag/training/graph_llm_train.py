"""Training RAS's Graph LLM (``kgrag.training.graph_llm``): the graph encoder, the
projector and LoRA trained together on multitask next-token prediction, seeded, then
saved beside the settings, the base GGUF's sha256 and the loss curve."""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from kgrag.errors import KgragError
from kgrag.host import PeakRSS
from kgrag.models.registry import file_sha256
from kgrag.progress import Progress
from kgrag.training.graph_llm import (
    IGNORE,
    MANIFEST,
    Embed,
    GraphLLMSettings,
    Parts,
    Sample,
    build_parts,
    feature_table,
    free_cores,
    torch_threads,
)


def train_graph_llm(samples: list[Sample], settings: GraphLLMSettings, gguf_path: Path,
                    embed: Embed, out: Path, threads: int | None = None) -> dict:
    """Train the graph encoder, projector and LoRA on ``samples`` over the GGUF at
    ``gguf_path``; save the model into ``out``; return the report: sample and token
    counts, the loss per optimiser step and per epoch, wall seconds and peak RSS.

    ``threads`` fixes torch's thread count; by default it is fitted once, at the start,
    to the free cores. Float sums differ in their last bits between thread counts, so
    the same samples, settings and thread count give the same losses."""
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from kgrag.training.graph_encoder import graph_of, texts_of

    if not samples:
        raise KgragError("the Graph LLM needs at least one training sample")
    started = time.perf_counter()
    with PeakRSS() as rss, torch_threads(threads or free_cores().threads()) as used:
        graphs = [graph_of(g) for s in samples for g in s.subgraphs]
        texts = texts_of(graphs)
        # one text fixes the feature width where no sample has a graph
        vectors = np.asarray(embed(texts or ["graph"]), dtype=np.float32)
        width = vectors.shape[-1]
        table, rows = feature_table(texts, vectors, width)
        parts = build_parts(gguf_path, embed, settings, width)
        encoded = [parts.encode(s) for s in samples]
        lora = [p for p in parts.llm.parameters() if p.requires_grad]
        encoder = list(parts.encoder.parameters())
        trained = lora + encoder
        optimiser = torch.optim.AdamW(
            [{"params": lora}, {"params": encoder, "lr": settings.encoder_learning_rate
                                or settings.learning_rate}],
            lr=settings.learning_rate, weight_decay=settings.weight_decay)
        batches = math.ceil(len(encoded) / settings.batch_size)
        per_epoch = math.ceil(batches / settings.grad_accumulation)
        total = per_epoch * settings.epochs
        schedule = get_cosine_schedule_with_warmup(
            optimiser, math.ceil(settings.warmup_ratio * total), total)
        order = list(range(len(encoded)))
        shuffle = random.Random(settings.seed)
        curve: list[dict] = []
        report = Progress("graph-llm", total, unit="step")
        parts.llm.train()
        parts.encoder.train()
        for epoch in range(1, settings.epochs + 1):
            shuffle.shuffle(order)
            chunks = [order[i:i + settings.batch_size]
                      for i in range(0, len(order), settings.batch_size)]
            for start in range(0, len(chunks), settings.grad_accumulation):
                group = chunks[start:start + settings.grad_accumulation]
                losses = []
                for chunk in group:
                    embeds, mask, labels = parts.embeddings(
                        [encoded[i] for i in chunk], table, rows)
                    loss = parts.llm(inputs_embeds=embeds, attention_mask=mask,
                                     labels=labels).loss
                    (loss / len(group)).backward()
                    losses.append(float(loss.detach()))
                torch.nn.utils.clip_grad_norm_(trained, settings.clip)
                optimiser.step()
                schedule.step()
                optimiser.zero_grad()
                curve.append({"step": len(curve) + 1, "epoch": epoch,
                              "loss": sum(losses) / len(losses),
                              "learning_rate": schedule.get_last_lr()[0]})
                report.tick()
        report.close()
        parts.llm.eval()
        parts.encoder.eval()
        sha = file_sha256(gguf_path)
        epochs = [sum(r["loss"] for r in curve if r["epoch"] == e)
                  / max(1, sum(r["epoch"] == e for r in curve))
                  for e in range(1, settings.epochs + 1)]
        save(parts, out, sha, gguf_path.name, curve)
    return {"samples": len(samples),
            "prompt_tokens": sum(e.labels.count(IGNORE) - 1 for e in encoded),
            "target_tokens": sum(len(e.labels) - e.labels.count(IGNORE) for e in encoded),
            "truncated_prompts": sum(e.truncated for e in encoded),
            "graph_texts": len(texts), "threads": used, "steps": curve, "epoch_losses": epochs,
            "wall_s": round(time.perf_counter() - started, 2),
            "peak_rss_mb": round(rss.peak / 2**20, 1), "base_sha256": sha}


def save(parts: Parts, out: Path, sha: str, base: str, curve: list[dict]) -> None:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    parts.llm.save_pretrained(str(out / "adapter"))
    torch.save(parts.encoder.state_dict(), out / "encoder.pt")
    (out / MANIFEST).write_text(json.dumps(
        {"settings": asdict(parts.settings), "base_sha256": sha, "base_file": base,
         "feature_width": parts.width, "losses": curve}, indent=1))
