"""The curriculum's InfoNCE training on the real MiniLM: it moves questions towards their
positives and away from their negatives, keeps a loss curve, and is seeded."""

import numpy as np

from kgrag.models.registry import resolve_embedder
from kgrag.training.curriculum import Example, Settings, train

SETTINGS = Settings(epochs=12, learning_rate=1e-4, batch_size=2, temperature=0.05,
                    warmup_steps=0, seed=0, max_seq_length=32)
EXAMPLES = [
    Example("Who built the bridge?", "The tower stands on a hill.", ("The bridge spans a river.",),
            "q1"),
    Example("What colour is the sky?", "Bananas are yellow.", ("The sky is blue.",), "q2")]


def _margin(folder):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    margins = []
    for e in EXAMPLES:
        q, p, n = model.encode([e.anchor, e.positive, e.negatives[0]], normalize_embeddings=True)
        margins.append(float(q @ p - q @ n))
    return np.mean(margins)


def test_training_pulls_positives_closer_than_negatives(tmp_path):
    base = resolve_embedder("all-MiniLM-L6-v2").path
    curve = train(base, tmp_path / "model", EXAMPLES, SETTINGS)
    assert len(curve) == 12 and curve[-1]["loss"] < curve[0]["loss"]
    assert _margin(tmp_path / "model") > _margin(base) + 0.1


def test_the_same_seed_gives_the_same_curve(tmp_path):
    base = resolve_embedder("all-MiniLM-L6-v2").path
    short = Settings(**{**SETTINGS.__dict__, "epochs": 2})
    first = train(base, tmp_path / "a", EXAMPLES, short)
    second = train(base, tmp_path / "b", EXAMPLES, short)
    assert [r["loss"] for r in first] == [r["loss"] for r in second]


class Interrupted(Exception):
    pass


def _stopping_after(n):
    """A progress hook that stops the training after ``n`` optimiser steps."""
    def progress(steps, total):
        for done, step in enumerate(steps):
            if done == n:
                raise Interrupted
            yield step
    return progress


def test_an_interrupted_training_resumes_at_its_last_epoch_to_the_same_model(tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer

    base = resolve_embedder("all-MiniLM-L6-v2").path
    three = Settings(**{**SETTINGS.__dict__, "epochs": 3})  # one step per epoch
    whole = train(base, tmp_path / "whole", EXAMPLES, three)
    resume = tmp_path / "resume"
    try:
        train(base, tmp_path / "parts", EXAMPLES, three, _stopping_after(2), resume)
    except Interrupted:
        pass
    assert (resume / "state.pt").exists() and not (tmp_path / "parts").exists()
    kept = torch.load(resume / "state.pt", weights_only=False)["curve"]
    assert [r["step"] for r in kept] == [1, 2]  # the second epoch's state; the third's lost
    ran = []

    def counting(steps, total):
        for step in steps:
            ran.append(step)
            yield step

    parts = train(base, tmp_path / "parts", EXAMPLES, three, counting, resume)
    assert ran == [2]  # only the last epoch ran again
    assert parts == whole
    a, b = (SentenceTransformer(str(tmp_path / f), device="cpu") for f in ("whole", "parts"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
