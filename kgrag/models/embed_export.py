"""The embedder exported for an optimised runtime, once, as a cached artefact.

The transformer of a sentence-transformers folder is exported to ONNX by PyTorch's own
exporter (``torch.onnx``, from the folder's files: no hub access), then, per backend,
quantised to int8 by ONNX Runtime's quantiser, converted by OpenVINO, or quantised by
NNCF. Pooling and normalisation are not exported: ``kgrag.models.embed_runtime`` applies
them as the folder's modules say.

Each artefact lies in a folder named by a hash of everything that makes it (the model's
sha256, the exporter's and quantiser's versions, the quantisation settings), so a second
run exports nothing and a new exporter exports afresh. A folder is written under a
temporary name and renamed into place when complete, so a killed export leaves no
half-written artefact and two processes exporting at once both end with one whole copy.
An export that fails raises one ``KgragError``; nothing falls back to another backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError
from kgrag.models.cache import canonical_json
from kgrag.models.embed_backends import Backend

OPSET = 18
FORMAT = 1  # raised when this module changes how it exports: earlier artefacts are not used
KEY_FILE = "export.json"  # in each artefact folder: what made it
CALIBRATION_BATCH = 8  # texts per NNCF calibration sample
Tokenise = Callable[[list[str]], dict[str, np.ndarray]]  # texts → int64 arrays by input name


def exported(model_dir: Path, model_sha256: str, chosen: Backend, root: Path,
             calibration: Callable[[], list[str]], tokenise: Tokenise) -> Path:
    """The file ``chosen``'s runtime loads (``.onnx`` or OpenVINO's ``.xml``), exported
    into ``root`` on first use. ``calibration`` gives the texts NNCF calibrates
    activations on (called only when an ``openvino-int8`` model is made), tokenised by
    ``tokenise`` as the runtime tokenises them."""
    onnx_key = {"format": FORMAT, "model_sha256": model_sha256,
                "exporter": f"torch {version('torch')}",
                "onnxscript": version("onnxscript"), "opset": OPSET}
    fp32 = _artefact(root, "onnx", onnx_key, "model.onnx",
                     lambda out: _export_onnx(model_dir, out), chosen.name)
    if chosen.name == "onnx":
        return fp32
    if chosen.name == "onnx-int8":
        key = onnx_key | {"quantiser": f"onnxruntime {version('onnxruntime')}",
                          "quantisation": "dynamic, per-tensor, weights QInt8"}
        return _artefact(root, "onnx-int8", key, "model.onnx",
                         lambda out: _quantise_dynamic(fp32, out), chosen.name)
    if chosen.name == "openvino":
        key = onnx_key | {"converter": f"openvino {version('openvino')}"}
        return _artefact(root, "openvino", key, "model.xml",
                         lambda out: _convert_openvino(fp32, out), chosen.name)
    if chosen.name == "openvino-int8":
        texts = calibration()
        key = onnx_key | {"converter": f"openvino {version('openvino')}",
                          "quantiser": f"nncf {version('nncf')}",
                          "quantisation": "static, transformer preset",
                          "calibration_sha256": hashlib.sha256(
                              canonical_json(texts).encode()).hexdigest()}
        return _artefact(root, "openvino-int8", key, "model.xml",
                         lambda out: _quantise_openvino(fp32, texts, tokenise, out),
                         chosen.name)
    raise AssertionError(f"no export for backend {chosen.name}")


def _artefact(root: Path, kind: str, key: dict[str, Any], filename: str,
              make: Callable[[Path], None], backend_name: str) -> Path:
    """``root/<kind>-<hash of key>/<filename>``, made by ``make(folder)`` if absent."""
    folder = root / f"{kind}-{hashlib.sha256(canonical_json(key).encode()).hexdigest()[:16]}"
    if (folder / KEY_FILE).is_file():
        return folder / filename
    try:
        root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=root, prefix=f".{kind}-"))
    except OSError as exc:
        raise KgragError(f"cannot write the exported embedder ({backend_name}) in {root}: "
                         f"{exc}") from exc
    try:
        make(scratch / filename)
        (scratch / KEY_FILE).write_text(json.dumps(key, indent=1, sort_keys=True) + "\n")
        try:
            os.rename(scratch, folder)
        except OSError:  # another process put a whole copy there first
            if not (folder / KEY_FILE).is_file():
                raise
    except KgragError:
        raise
    except Exception as exc:  # exporters and quantisers raise anything
        raise KgragError(f"cannot export the embedder for backend {backend_name!r} "
                         f"({kind} step): {type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder / filename


def _export_onnx(model_dir: Path, out: Path) -> None:
    """The folder's transformer as one ONNX file: token ids (and their mask and types,
    as its tokenizer gives them) in, the last hidden states out, batch and length free."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    names = list(AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
                 .model_input_names)

    class Encoder(torch.nn.Module):
        """The transformer with positional inputs, named as the tokenizer names them."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(names, inputs))).last_hidden_state

    sample = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    positions = getattr(model.config, "max_position_embeddings", None)
    batch = torch.export.Dim("batch")
    length = torch.export.Dim("length", **({"max": positions} if positions else {}))
    quiet = logging.getLogger("torch.onnx")  # notes on optional operators it skips
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with (torch.no_grad(), warnings.catch_warnings(),
              contextlib.redirect_stdout(io.StringIO())):
            warnings.simplefilter("ignore")  # the exporter's notes on axis names
            torch.onnx.export(Encoder(), sample, str(out), dynamo=True, opset_version=OPSET,
                              input_names=names, output_names=["last_hidden_state"],
                              dynamic_shapes=(tuple({0: batch, 1: length} for _ in names),),
                              external_data=False, verbose=False)
    finally:
        quiet.setLevel(level)


def _quantise_dynamic(fp32: Path, out: Path) -> None:
    """ONNX Runtime's dynamic int8: weights quantised once, activations per batch."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8)


def _convert_openvino(fp32: Path, out: Path) -> None:
    """OpenVINO's own model format, weights kept fp32 (its default compresses to fp16)."""
    import openvino

    openvino.save_model(openvino.convert_model(str(fp32)), str(out), compress_to_fp16=False)


def _quantise_openvino(fp32: Path, texts: list[str], tokenise: Tokenise, out: Path) -> None:
    """NNCF's static int8 for transformers: activations' ranges calibrated on ``texts``,
    tokenised by ``tokenise``."""
    import nncf
    import openvino

    samples = [tokenise(texts[i:i + CALIBRATION_BATCH])
               for i in range(0, len(texts), CALIBRATION_BATCH)]
    quantised = nncf.quantize(openvino.convert_model(str(fp32)), nncf.Dataset(samples),
                              model_type=nncf.ModelType.TRANSFORMER,
                              subset_size=len(samples))
    openvino.save_model(quantised, str(out), compress_to_fp16=False)
