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
