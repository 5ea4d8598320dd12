"""The exported embedder run by ONNX Runtime or OpenVINO, as sentence-transformers runs it.

sentence-transformers computes a vector in three modules, listed in the folder's
``modules.json``: the transformer (tokenise, truncate to ``max_seq_length``, run), the
pooling of its token states (``1_Pooling/config.json``) and, usually, normalisation.
Only the transformer is exported; the rest is read from those files and done here in
numpy, so the vectors match sentence-transformers' up to the runtime's arithmetic. A
folder with any other module (a dense projection, say) is refused: its vectors would
not be the model's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.host import usable_cores
from kgrag.models.embed.backends import Backend
from kgrag.models.embed.export import exported
from kgrag.models.offline import offline

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"
POOLING_MODES = ("mean_tokens", "cls_token", "max_tokens")
# Fixed texts that calibrate int8 activations, whatever corpus is embedded later (a
# corpus's own chunks would make the model, and so the vectors, depend on which corpus
# came first): 128 abstracts of HolisQA's research papers (MIT), none of the multi-hop
# samples that measure recall.
CALIBRATION = Path(__file__).with_name("calibration.jsonl")
# Texts the runtime takes in one inference, and the multiple of tokens each piece is
# padded to. OpenVINO keeps the working memory of the largest input it has run, and more
# for every input shape it has seen: batches of 64 padded to their longest text (almost
# every batch a new shape, the texts sorted longest first) held 1,958 MB embedding
# 30,000 chunks and grew 9.8 KB a text; pieces of 16 padded to eight lengths at most
# held 928 MB, 9 % faster, with the same vectors but 2 of the 30,000 (3.5e-4 at most
# in a component: docs/embedding-backends.md).
RUN_TEXTS, PAD_TO = 16, 32


@dataclass(frozen=True)
class ModuleConfig:
    """What a sentence-transformers folder says about tokenising and pooling."""

    folder: Path
    max_length: int
    lower_case: bool
    pooling: str  # one of POOLING_MODES

    @classmethod
    def read(cls, folder: Path) -> ModuleConfig:
        """The folder's configuration; a ``KgragError`` for one this runner cannot
        reproduce exactly."""
        try:
            modules = json.loads((folder / "modules.json").read_text())
            types = [m["type"] for m in modules]
            settings = json.loads((folder / "sentence_bert_config.json").read_text())
            pooling_path = next(m["path"] for m in modules if m["type"] == POOLING)
            pooling = json.loads((folder / pooling_path / "config.json").read_text())
        except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
            raise KgragError(f"cannot read the sentence-transformers modules of {folder} "
                             f"(modules.json, sentence_bert_config.json, the pooling "
                             f"config): {exc}") from exc
        if types[:2] != [TRANSFORMER, POOLING] or set(types[2:]) - {NORMALIZE}:
            raise KgragError(f"the embedder {folder} has modules {types}; an exported "
                             "backend runs Transformer, Pooling and Normalize only: use "
                             "models.embedder.backend 'torch' for this model")
        modes = [m for m in POOLING_MODES if pooling.get(f"pooling_mode_{m}")]
        others = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v
                  and k.removeprefix("pooling_mode_") not in POOLING_MODES]
        if len(modes) != 1 or others:
            raise KgragError(f"the embedder {folder} pools by {modes + others}; an exported "
                             f"backend pools by exactly one of {', '.join(POOLING_MODES)}")
        return cls(folder, int(settings["max_seq_length"]),
                   bool(settings.get("do_lower_case", False)), modes[0])

    def tokeniser(self, multiple: int | None = None
                  ) -> Callable[[list[str]], dict[str, np.ndarray]]:
        """The folder's own tokenizer, truncating and padding as sentence-transformers
        does (``multiple``: padding to a multiple of this many tokens): int64 arrays by
        input name."""
        offline()
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)

        def tokenise(texts: list[str]) -> dict[str, np.ndarray]:
            texts = [t.lower() for t in texts] if self.lower_case else texts
            encoded = tokenizer(texts, padding=True, truncation="longest_first",
                                max_length=self.max_length, return_tensors="np",
                                pad_to_multiple_of=multiple)
            return {name: np.asarray(encoded[name], dtype=np.int64)
                    for name in tokenizer.model_input_names}

        return tokenise

    def tokenise(self, texts: list[str]) -> dict[str, np.ndarray]:
        """``texts`` tokenised once (calibration); encoding keeps one ``tokeniser``."""
        return self.tokeniser()(texts)

    def pool(self, states: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Token states pooled into one unit-length vector per text."""
        if self.pooling == "cls_token":
            pooled = states[:, 0]
        elif self.pooling == "max_tokens":
            pooled = np.where(mask[..., None] > 0, states, -1e9).max(axis=1)
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (states * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def calibration_texts() -> list[str]:
    """The texts NNCF calibrates an int8 OpenVINO model on (``CALIBRATION``)."""
    return [json.loads(line)["text"] for line in CALIBRATION.read_text().splitlines()]


class ExportedBackend:
    """An exported embedder on an optimised CPU runtime, loaded (and exported, the first
    time) on first use, so a fully cached run loads nothing."""

    def __init__(self, folder: Path, sha256: str, chosen: Backend, root: Path,
                 calibration: Callable[[], list[str]], *, threads: int | None = None,
                 max_length: int | None = None) -> None:
        """``threads``: the runtime's threads, else one per core this process may use;
        ``max_length``: tokens kept per text, else the model's own ``max_seq_length``
        (a benchmark's knob: a shorter one changes the vectors)."""
        self.folder, self.sha256, self.chosen, self.root = folder, sha256, chosen, root
        self.calibration, self.threads, self.max_length = calibration, threads, max_length
        self._run: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None
        self._config: ModuleConfig | None = None
        self._tokenise: Callable[[list[str]], dict[str, np.ndarray]] | None = None
        self._file: Path | None = None  # the export, found whole by this process

    def __getstate__(self) -> dict[str, Any]:
        """A copy sent to a Ray worker loads its own model and tokenizer, and checks the
        export on its own node's disk."""
        return {**self.__dict__, "_run": None, "_config": None, "_tokenise": None,
                "_file": None}

    def export(self) -> Path:
        """The exported model's file, exported first where it is not whole in ``root``,
        and checked once per process: what ``CachedEmbedder`` calls in its own process
        before copies of this backend are sent to Ray workers, so that no worker exports
        while the others wait."""
        if self._file is None:
            own = ModuleConfig.read(self.folder)  # the model's own, as calibration tokenises
            self._file = exported(self.folder, self.sha256, self.chosen, self.root,
                                  self.calibration, own.tokenise)
        return self._file

    def load(self) -> None:
        """Export (once) and load the model, and its tokenizer."""
        if self._run is not None:
            return
        path = self.export()
        own = ModuleConfig.read(self.folder)
        self._config = own if self.max_length is None else dataclasses.replace(
            own, max_length=self.max_length)
        self._tokenise = self._config.tokeniser(PAD_TO)
        threads = self.threads or usable_cores()
        self._run = (_onnxruntime(path, threads) if self.chosen.runtime == "onnxruntime"
                     else _openvino(path, threads))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, as ``SentenceTransformerBackend.encode`` gives."""
        self.load()
        assert self._run and self._config and self._tokenise
        pieces = []
        for start in range(0, len(texts), RUN_TEXTS):
            inputs = self._tokenise(texts[start:start + RUN_TEXTS])
            pieces.append(self._config.pool(self._run(inputs), inputs["attention_mask"]))
        return np.concatenate(pieces) if pieces else np.zeros((0, 0), dtype=np.float32)


def _onnxruntime(path: Path, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = onnxruntime.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
    return lambda inputs: session.run(None, inputs)[0]


def _openvino(path: Path, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    offline()
    import openvino

    # Unpinned: OpenVINO pins its inference threads to the first cores, so two processes
    # of one thread each (the one-CPU Ray workers of a node, or two runs side by side)
    # shared one core: 0.96x one process's throughput, 1.83x unpinned, and one process
    # runs as fast either way (docs/operations.md, "Scale-out on Ray").
    compiled: Any = openvino.Core().compile_model(
        str(path), "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                           "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False})
    return lambda inputs: compiled(inputs)[0]
