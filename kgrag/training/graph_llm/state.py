"""What a Graph-LLM training (``kgrag.training.graph_llm.train``) keeps between optimiser
steps, so that a stopped training continues where it stopped, to the model and loss curve
of one never stopped.

After every optimiser step the whole state goes into ``state.pt`` in the resume folder:
the trained weights (LoRA, the encoder with its projector), AdamW's moments, the
schedule, the epoch's sample order and the shuffle RNG that makes the next, torch's RNG
(the dropouts draw from it), the loss curve (its length is the step reached) and the
pieces run so far. Every step, not every few: on 2 shared cores a step of the bundled
SmolLM2 on MuSiQue's samples took 62 and 85 s on one thread, and its state (25 MB) is
written in about 0.2 s (0.3 % of a step), so a queue turn's end or Ctrl-C loses at most the
step under way. The file is
written beside the last one and renamed over it, and a step's update and its write are
held together against Ctrl-C and SIGTERM (``held_signals``): the file always holds one
whole step.
"""

from __future__ import annotations

import os
import random
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE = "state.pt"
STOPS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Position:
    """What moves as the training goes, besides the weights and the optimiser."""

    order: list[int]  # the samples in this epoch's order
    shuffle: random.Random  # the RNG that shuffles the next epoch
    curve: list[dict]  # one row per completed optimiser step
    pieces: list[dict]  # one row per run that trained: from, to, threads, seconds


def keep(resume: Path, parts: Any, optimiser: Any, schedule: Any, position: Position) -> None:
    """Replace the state in ``resume`` by this one, whole: written beside, then renamed."""
    import torch

    resume.mkdir(parents=True, exist_ok=True)
    fresh = resume / f"{STATE}.next"
    with open(fresh, "wb") as out:
        torch.save({"lora": _trained(parts.llm), "encoder": parts.encoder.state_dict(),
                    "optimiser": optimiser.state_dict(), "schedule": schedule.state_dict(),
                    "order": position.order, "shuffle": position.shuffle.getstate(),
                    "torch": torch.get_rng_state(), "curve": position.curve,
                    "pieces": position.pieces}, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(fresh, resume / STATE)


def restore(resume: Path | None, parts: Any, optimiser: Any, schedule: Any,
            position: Position) -> bool:
    """Load the state kept in ``resume`` into the training's parts, optimiser, schedule
    and ``position``; False (nothing changed) where there is none."""
    import torch

    if resume is None or not (resume / STATE).exists():
        return False
    saved = torch.load(resume / STATE, weights_only=False)
    with torch.no_grad():
        for name, weights in _trained(parts.llm).items():
            weights.copy_(saved["lora"][name])
    parts.encoder.load_state_dict(saved["encoder"])
    optimiser.load_state_dict(saved["optimiser"])
    schedule.load_state_dict(saved["schedule"])
    position.shuffle.setstate(saved["shuffle"])
    torch.set_rng_state(saved["torch"])
    position.order, position.curve = saved["order"], saved["curve"]
    position.pieces = saved["pieces"]
    return True


def _trained(llm: Any) -> dict:
    """The LLM's trained weights (its LoRA adapters) by name; the base stays frozen."""
    return {name: p for name, p in llm.named_parameters() if p.requires_grad}


@contextmanager
def held_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM arriving inside the block act at its end, through the handlers
    in place before it. Outside the main thread (where Python takes no signal) the block
    just runs.

    A stop ignored by whoever started kgrag (``nohup``, or ``&`` in a script: the shell
    ignores SIGINT in background jobs) is left ignored rather than held: holding it would
    catch it for the block, and a process started inside it would inherit the default
    (exec keeps an ignored signal ignored, but resets a caught one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    before = {s: signal.signal(s, lambda number, frame: held.append(number))
              for s in STOPS if signal.getsignal(s) != signal.SIG_IGN}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        for number in dict.fromkeys(held):
            signal.raise_signal(number)
