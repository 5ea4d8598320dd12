"""RAS's Graph-LLM training step: the padded batched loss against the unpadded target
loss (``Parts.target_loss``) on the real training samples of a spec's ras entry.

    flock /tmp/kgrag-cpu.lock python benchmarks/graph_llm_step.py specs/ras_scale_musique.yaml
        [--entry planner] [--batches 4] [--rounds 3] [--threads N]

The samples: the entry's MuSiQue-/HotpotQA-SUBQ artefact (its ``subq`` step must have run),
the training rows in their first seeded epoch order, ``--batches`` batches of the
entry's batch size. Each round times, interleaved in one process, every batch's forward
and backward through (a) the right-padded batch with labels (the LM head at every
position) and (b) the target loss; dropout is off, so both see the same function.
Printed: tokens per batch (real and padded), seconds per batch (median of the rounds'
per-batch means) of each path and their ratio, the largest loss difference and the
largest relative difference of the trainable parameters' gradients. Timings on a shared
machine are upper bounds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from kgrag import api
from kgrag.host import usable_cores
from kgrag.models.served import model_file
from kgrag.steps.ras_train import read_samples
from kgrag.training.graph_llm.encoder import graph_of
from kgrag.training.graph_llm.model import GraphLLMSettings, build_parts, torch_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--entry", default="planner", help="the ras training entry's name")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: the usable cores)")
    args = parser.parse_args()

    import torch

    session = api.open_session(args.spec)
    step = session.plan.by_name()[f"graph_llm.{args.entry}"]
    settings = GraphLLMSettings(**step.config["settings"])
    samples = [s for s, held, _ in read_samples(session.artefact(f"subq.{args.entry}"))
               if not held]
    models = session.models
    embed = models.embedder_of(step.config["embedder"]).encode
    order = list(range(len(samples)))
    random.Random(settings.seed).shuffle(order)
    size = settings.batch_size
    chosen = [[samples[i] for i in order[b * size:(b + 1) * size]] for b in range(args.batches)]

    with torch_threads(args.threads or usable_cores()) as threads:
        parts = build_parts(model_file(models.model("answerer"), "the benchmark"), embed,
                            settings, embed(["graph"]).shape[-1])
        table, rows = parts.features(
            [graph_of(g) for batch in chosen for s in batch for g in s.subgraphs])
        parts.llm.eval()
        parts.encoder.eval()
        trainable = [p for p in list(parts.llm.parameters()) + list(parts.encoder.parameters())
                     if p.requires_grad]
        encoded = [[parts.encode(s) for s in batch] for batch in chosen]

        def padded(batch):
            embeds, mask, labels = parts.embeddings(batch, table, rows)
            return parts.llm(inputs_embeds=embeds, attention_mask=mask, labels=labels).loss

        def unpadded(batch):
            return parts.target_loss(batch, table, rows)

        def run(path, batch):
            started = time.perf_counter()
            loss = path(batch)
            grads = torch.autograd.grad(loss, trainable, allow_unused=True)
            flat = torch.cat([(g if g is not None else torch.zeros_like(p)).flatten()
                              for g, p in zip(grads, trainable)])
            return time.perf_counter() - started, float(loss.detach()), flat

        times: dict[str, list[float]] = {"padded": [], "target": []}
        loss_gap, grad_gap = 0.0, 0.0
        for _ in range(args.rounds):
            spent = {"padded": [], "target": []}
            for batch in encoded:
                a = run(padded, batch)
                b = run(unpadded, batch)
                spent["padded"].append(a[0])
                spent["target"].append(b[0])
                loss_gap = max(loss_gap, abs(a[1] - b[1]))
                grad_gap = max(grad_gap, float((a[2] - b[2]).norm() / a[2].norm()))
            for path, values in spent.items():
                times[path].append(statistics.mean(values))

    real = statistics.mean(sum(len(e.ids) for e in batch) for batch in encoded)
    padded_tokens = statistics.mean(len(batch) * max(len(e.ids) for e in batch)
                                    for batch in encoded)
    before, after = statistics.median(times["padded"]), statistics.median(times["target"])
    print(f"{len(samples)} training samples; {args.batches} batches of {size}; "
          f"{threads} torch threads; {args.rounds} rounds")
    print(f"tokens per batch: {real:.1f} real, {padded_tokens:.1f} padded")
    print("| path | s per batch (forward + backward) |\n|---|---|")
    print(f"| padded batch, LM head at every position | {before:.2f} |")
    print(f"| target loss, unpadded | {after:.2f} ({before / after:.2f}x) |")
    print(f"largest loss difference {loss_gap:.2e}; largest relative gradient "
          f"difference {grad_gap:.2e}")


if __name__ == "__main__":
    main()
