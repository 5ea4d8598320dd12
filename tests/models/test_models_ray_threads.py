"""A Ray worker runs its work on the CPUs Ray gave it, not on every core of its node.

Ray sets ``OMP_NUM_THREADS`` to an actor's CPUs only where the environment has none, and
the exported embedders' runtimes (OpenVINO, ONNX Runtime) read no such variable: by the
node's core count, two one-CPU workers on a 2-core node would run four threads on two
cores, and the one worker of a one-node cluster would take both.
"""

from __future__ import annotations

import pytest

from kgrag.models.embed.embedder import EmbedderSettings, SentenceTransformerBackend
from kgrag.models.executor import RayExecutor
from kgrag.models.registry import resolve_embedder
from tests.ray_nodes import RAY, ThreadsSeen, ray_nodes

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.skipif(not RAY.is_file(), reason="starts the ray CLI")


def test_a_one_cpu_worker_embeds_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: torch took the node's OMP_NUM_THREADS (2), the runtime every core (2)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a user's setting, which Ray keeps
    model = resolve_embedder("all-MiniLM-L6-v2")
    work = ThreadsSeen(SentenceTransformerBackend(
        EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)))
    with ray_nodes(1) as address:
        seen = RayExecutor(address, 1).map_work(work, lambda each, texts: each(texts),
                                                [["Ray gave this worker one CPU."]])
    assert seen == [[{"torch": 1, "runtime": 1}]]
