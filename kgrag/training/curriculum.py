"""ARK's curriculum contrastive fine-tuning (Sec. 3.3.2, Alg. 3) of a sentence-transformers
retriever, on the CPU.

Every stage minimises InfoNCE over cosine similarities at temperature τ:
L = −log exp(s(q, t⁺)/τ) / Σ_{t ∈ C(q)} exp(s(q, t)/τ), where C(q) is the example's
positive, its own hard negatives (stages 2 and 3) and every other text of the batch
(in-batch negatives, as ms-SWIFT, the authors' trainer, gathers them). A text of another
example of the same question (another of its positives) is masked out of C(q), so a
question's positives never push each other away. AdamW, linear warm-up then linear
decay, seeded shuffling and initialisation: the same examples and seed give the same
model on one machine. With a ``resume`` folder the state after each epoch is kept there,
and a training that finds it continues from it, to the same model as one that was never
interrupted: a long stage stopped partway loses at most an epoch.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kgrag.models.offline import offline

STATE = "state.pt"  # in a resume folder, beside the model: optimiser, schedule, RNGs, curve


@dataclass(frozen=True)
class Example:
    """One training example: an anchor question, its positive unit and hard negatives;
    ``group`` is the original question it comes from."""

    anchor: str
    positive: str
    negatives: tuple[str, ...]
    group: str


@dataclass(frozen=True)
class Settings:
    epochs: int
    learning_rate: float
    batch_size: int
    temperature: float
    warmup_steps: int
    seed: int
    max_seq_length: int


def train(model_dir: Path, out_dir: Path, examples: Sequence[Example], settings: Settings,
          progress=lambda steps, total: steps, resume: Path | None = None) -> list[dict]:
    """Fine-tune the model in ``model_dir`` on ``examples``, save it to ``out_dir``; returns
    the loss curve, one row per optimiser step. ``resume``: the folder of the state after
    the last completed epoch, continued from when it holds one (see the module)."""
    offline()
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(settings.seed)
    saved = (torch.load(resume / STATE, weights_only=False)
             if resume is not None and (resume / STATE).exists() else None)
    model = SentenceTransformer(str(model_dir if saved is None or resume is None
                                    else resume / "model"),
                                device="cpu")
    model.max_seq_length = settings.max_seq_length
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    batches = [len(examples[i:i + settings.batch_size])
               for i in range(0, len(examples), settings.batch_size)]
    total = len(batches) * settings.epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: _rate(step, settings.warmup_steps, total))
    order = list(range(len(examples)))
    shuffle = random.Random(settings.seed)
    curve: list[dict] = []
    if saved is not None:
        optimiser.load_state_dict(saved["optimiser"])
        schedule.load_state_dict(saved["schedule"])
        shuffle.setstate(saved["shuffle"])
        torch.set_rng_state(saved["torch"])
        order, curve = saved["order"], saved["curve"]
    model.train()
    for step in progress(range(len(curve), total), total):
        epoch, index = divmod(step, len(batches))
        if index == 0:
            shuffle.shuffle(order)
        batch = [examples[i] for i in order[index * settings.batch_size:
                                            (index + 1) * settings.batch_size]]
        loss = _loss(model, batch, settings.temperature)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        curve.append({"step": step + 1, "epoch": epoch + 1, "loss": float(loss.detach()),
                      "learning_rate": float(schedule.get_last_lr()[0])})
        if resume is not None and index == len(batches) - 1 and step + 1 < total:
            _keep(resume, model, {"optimiser": optimiser.state_dict(),
                                  "schedule": schedule.state_dict(),
                                  "shuffle": shuffle.getstate(),
                                  "torch": torch.get_rng_state(), "order": order,
                                  "curve": curve})
    model.eval()
    model.save(str(out_dir))
    return curve


def _keep(resume: Path, model, state: dict) -> None:
    """Replace the state in ``resume`` by this one, whole: written beside, then renamed."""
    import torch

    fresh = resume.with_name(resume.name + ".next")
    shutil.rmtree(fresh, ignore_errors=True)
    model.save(str(fresh / "model"))
    torch.save(state, fresh / STATE)
    shutil.rmtree(resume, ignore_errors=True)
    os.replace(fresh, resume)


def _rate(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / (warmup + 1)
    return max(0.0, (total - step) / max(1, total - warmup))


def _loss(model, batch: Sequence[Example], temperature: float):
    import torch
    import torch.nn.functional as F

    anchors = [e.anchor for e in batch]
    texts = [e.positive for e in batch] + [n for e in batch for n in e.negatives]
    groups = [e.group for e in batch] + [e.group for e in batch for _ in e.negatives]
    owners = list(range(len(batch))) + [i for i, e in enumerate(batch) for _ in e.negatives]
    a = F.normalize(_encode(model, anchors), dim=-1)
    t = F.normalize(_encode(model, texts), dim=-1)
    logits = a @ t.T / temperature
    mask = torch.tensor([[groups[j] == batch[i].group and owners[j] != i
                          and j < len(batch) for j in range(len(texts))]
                         for i in range(len(batch))])
    logits = logits.masked_fill(mask, float("-inf"))
    return F.cross_entropy(logits, torch.arange(len(batch)))


def _encode(model, texts: list[str]):
    features = model.preprocess(texts)
    return model(features)["sentence_embedding"]
