"""Training RAS's Graph LLM (``kgrag.training.graph_llm``): the graph encoder, the
projector and LoRA trained together on multitask next-token prediction, seeded, then
saved beside the settings, the base GGUF's sha256 and the loss curve. With a resume
folder the state after each optimiser step is kept there (``kgrag.training.graph_llm.state``) and a
training that finds it continues from it."""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.host import PeakRSS
from kgrag.models.registry import file_sha256
from kgrag.training.graph_llm.model import (
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
from kgrag.training.graph_llm.state import Position, held_signals, keep, restore

StepProgress = Callable[[Iterable[int], int], Iterable[int]]


def train_graph_llm(samples: list[Sample], settings: GraphLLMSettings, gguf_path: Path,
                    embed: Embed, out: Path, threads: int | None = None,
                    progress: StepProgress = lambda steps, total: steps,
                    resume: Path | None = None) -> dict:
    """Train the graph encoder, projector and LoRA on ``samples`` over the GGUF at
    ``gguf_path``; save the model into ``out``; return the report: sample and token
    counts, the loss per optimiser step and per epoch, the pieces the training ran in,
    wall seconds and peak RSS of this call.

    ``threads`` fixes torch's thread count; by default it is fitted once, at the start,
    to the free cores. Float sums differ in their last bits between thread counts, so
    the same samples, settings and thread count give the same losses. ``progress(steps,
    count)`` wraps the steps still to run. ``resume``: the folder of the state after the
    last completed step, continued from when it holds one; a stop (Ctrl-C, or SIGTERM
    where the caller made it one) raises KeyboardInterrupt saying how many steps it kept."""
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from kgrag.training.graph_llm.encoder import graph_of, texts_of

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
        groups: list[dict[str, Any]] = [
            {"params": lora}, {"params": encoder, "lr": settings.encoder_learning_rate
                               or settings.learning_rate}]
        optimiser = torch.optim.AdamW(groups, lr=settings.learning_rate,
                                      weight_decay=settings.weight_decay)
        per_epoch = math.ceil(math.ceil(len(encoded) / settings.batch_size)
                              / settings.grad_accumulation)
        total = per_epoch * settings.epochs
        schedule = get_cosine_schedule_with_warmup(
            optimiser, math.ceil(settings.warmup_ratio * total), total)
        position = Position(list(range(len(encoded))), random.Random(settings.seed), [], [])
        restore(resume, parts, optimiser, schedule, position)
        first = len(position.curve)
        piece = {"from_step": first, "to_step": first, "threads": used, "wall_s": 0.0}
        position.pieces.append(piece)
        begun = time.perf_counter()
        parts.llm.train()
        parts.encoder.train()
        try:
            for step in progress(range(first, total), total - first):
                epoch, index = divmod(step, per_epoch)
                if index == 0:
                    position.shuffle.shuffle(position.order)
                size, accumulate = settings.batch_size, settings.grad_accumulation
                batches = [position.order[i:i + size]
                           for i in range(0, len(position.order), size)]
                group = batches[index * accumulate:(index + 1) * accumulate]
                losses = []
                for batch in group:
                    loss = parts.target_loss([encoded[i] for i in batch], table, rows)
                    (loss / len(group)).backward()
                    losses.append(float(loss.detach()))
                with held_signals():  # the update and its kept state: whole or not at all
                    torch.nn.utils.clip_grad_norm_(lora + encoder, settings.clip)
                    optimiser.step()
                    schedule.step()
                    optimiser.zero_grad()
                    position.curve.append({"step": step + 1, "epoch": epoch + 1,
                                           "loss": sum(losses) / len(losses),
                                           "learning_rate": schedule.get_last_lr()[0]})
                    piece.update(to_step=step + 1,
                                 wall_s=round(time.perf_counter() - begun, 2))
                    if resume is not None:
                        keep(resume, parts, optimiser, schedule, position)
        except KeyboardInterrupt as stop:
            kept = (f"the state after it is kept in {resume}" if resume is not None
                    else "nothing is kept (no resume folder)")
            raise KeyboardInterrupt(f"the Graph-LLM training stopped after step "
                                    f"{len(position.curve)} of {total}; {kept}") from stop
        parts.llm.eval()
        parts.encoder.eval()
        curve = position.curve
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
            "pieces": [p for p in position.pieces if p["to_step"] > p["from_step"]],
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
