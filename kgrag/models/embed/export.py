"""The embedder exported for an optimised runtime, once, as a cached artefact.

The transformer of a sentence-transformers folder is exported to ONNX by PyTorch's own
exporter (``torch.onnx``, from the folder's files: no hub access), then, per backend,
quantised to int8 by ONNX Runtime's quantiser, converted by OpenVINO, or quantised by
NNCF. Pooling and normalisation are not exported: ``kgrag.models.embed.runtime`` applies
them as the folder's modules say.

Each artefact lies in a folder named by a hash of everything that makes it (the model's
sha256, the exporter's and quantiser's versions, the quantisation settings), so a second
run exports nothing and a new exporter exports afresh. A folder is written under a
temporary name and renamed into place when complete, so a killed export leaves no
half-written artefact; the temporary folder it leaves is removed by the next export.
Exports hold a lock on the folder of exports, so a second process exporting the same
model waits for the first one's copy instead of making its own.

A complete folder ends with its manifest (``MANIFEST``): what made it and the size and
sha256 of each of its files, written last. Every load checks the files against it, as
the pipeline checks its artefacts (``kgrag.pipeline.integrity``), but hashing every file
whatever its size: a byte changed inside a model that still parses would otherwise give
other vectors, cached under the model's own key. A damaged export is exported again,
with a one-line warning. An export that fails raises one ``KgragError``; nothing falls
back to another backend.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock

from kgrag.errors import KgragError
from kgrag.models.cache import canonical_json
from kgrag.models.embed.backends import Backend
from kgrag.models.offline import offline

OPSET = 18
FORMAT = 1  # raised when this module changes how it exports: earlier artefacts are not used
MANIFEST = "export.json"  # in each artefact folder, written last: what made it, its files
LOCK = ".lock"  # in the folder of exports: held while exporting into it
CALIBRATION_BATCH = 8  # texts per NNCF calibration sample
Tokenise = Callable[[list[str]], dict[str, np.ndarray]]  # texts → int64 arrays by input name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """One artefact of an export: what names it, the file a runtime loads, and how that
    file is made from the previous step's (the first step's from the model's folder)."""

    kind: str
    key: dict[str, Any]
    filename: str
    make: Callable[[Path, Path], None]  # (what it is made from, the file to write)

    def folder(self, root: Path) -> Path:
        digest = hashlib.sha256(canonical_json(self.key).encode()).hexdigest()[:16]
        return root / f"{self.kind}-{digest}"


def exported(model_dir: Path, model_sha256: str, chosen: Backend, root: Path,
             calibration: Callable[[], list[str]], tokenise: Tokenise) -> Path:
    """The file ``chosen``'s runtime loads (``.onnx`` or OpenVINO's ``.xml``), exported
    into ``root`` on first use and whenever it is found damaged. ``calibration`` gives
    the texts NNCF calibrates activations on (called only for ``openvino-int8``),
    tokenised by ``tokenise`` as the runtime tokenises them."""
    steps = _steps(model_sha256, chosen, calibration, tokenise)
    last = steps[-1]
    if _damage(last.folder(root)) is None:  # exported before, and whole: no lock needed
        return last.folder(root) / last.filename
    made = model_dir
    with _exporting(root, chosen.name):
        for step in steps:
            made = _artefact(root, step, made, chosen.name)
    return made


def _steps(model_sha256: str, chosen: Backend, calibration: Callable[[], list[str]],
           tokenise: Tokenise) -> list[Step]:
    """The fp32 ONNX export, then the step that makes ``chosen``'s model from it."""
    key = {"format": FORMAT, "model_sha256": model_sha256,
           "exporter": f"torch {version('torch')}",
           "onnxscript": version("onnxscript"), "opset": OPSET}
    fp32 = Step("onnx", key, "model.onnx", _export_onnx)
    if chosen.name == "onnx":
        return [fp32]
    if chosen.name == "onnx-int8":
        return [fp32, Step("onnx-int8",
                           key | {"quantiser": f"onnxruntime {version('onnxruntime')}",
                                  "quantisation": "dynamic, per-tensor, weights QInt8"},
                           "model.onnx", _quantise_dynamic)]
    if chosen.name == "openvino":
        return [fp32, Step("openvino", key | {"converter": f"openvino {version('openvino')}"},
                           "model.xml", _convert_openvino)]
    if chosen.name == "openvino-int8":
        texts = calibration()
        return [fp32, Step("openvino-int8",
                           key | {"converter": f"openvino {version('openvino')}",
                                  "quantiser": f"nncf {version('nncf')}",
                                  "quantisation": "static, transformer preset",
                                  "calibration_sha256": hashlib.sha256(
                                      canonical_json(texts).encode()).hexdigest()},
                           "model.xml",
                           lambda fp32_file, out: _quantise_openvino(fp32_file, texts,
                                                                     tokenise, out))]
    raise AssertionError(f"no export for backend {chosen.name}")


@contextlib.contextmanager
def _exporting(root: Path, backend_name: str) -> Iterator[None]:
    """Hold the lock on ``root``, having removed what a killed export left there: while
    the lock is held no other export is running, so every temporary folder is stale."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(root / LOCK)
        lock.acquire()
    except OSError as exc:
        raise KgragError(f"cannot write the exported embedder ({backend_name}) in {root}: "
                         f"{exc}") from exc
    try:
        for path in root.iterdir():
            if path.name.startswith(".") and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        yield
    finally:
        lock.release()


def _artefact(root: Path, step: Step, source: Path, backend_name: str) -> Path:
    """``step``'s file in ``root``, made from ``source`` unless there and whole (under
    the lock of ``_exporting``)."""
    folder = step.folder(root)
    if folder.exists():
        problem = _damage(folder)
        if problem is None:
            return folder / step.filename
        log.warning("the exported embedder %s is damaged (%s); exporting it again",
                    folder, problem)
    aside = root / f".damaged-{folder.name}"
    try:
        scratch = Path(tempfile.mkdtemp(dir=root, prefix=f".{step.kind}-"))
    except OSError as exc:
        raise KgragError(f"cannot write the exported embedder ({backend_name}) in {root}: "
                         f"{exc}") from exc
    try:
        step.make(source, scratch / step.filename)
        _write_manifest(scratch, step.key)
        if folder.exists():  # moved aside whole, so no reader meets it half-deleted
            os.rename(folder, aside)
        os.rename(scratch, folder)
    except KgragError:
        raise
    except Exception as exc:  # exporters and quantisers raise anything
        raise KgragError(f"cannot export the embedder for backend {backend_name!r} "
                         f"({step.kind} step): {type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)
    return folder / step.filename


def _write_manifest(folder: Path, key: dict[str, Any]) -> None:
    """What made the export and each of its files' size and sha256, written last into
    its temporary folder: the folder appears under its name only whole (renamed)."""
    files = {path.relative_to(folder).as_posix(): {"size": path.stat().st_size,
                                                   "sha256": _sha256(path)}
             for path in sorted(folder.rglob("*")) if path.is_file()}
    (folder / MANIFEST).write_text(
        json.dumps({"made_by": key, "files": files}, indent=1, sort_keys=True) + "\n")


def _damage(folder: Path) -> str | None:
    """The first way ``folder`` differs from its manifest (a file missing, resized or
    changed; the manifest missing, unreadable, or without checksums as an earlier kgrag
    wrote it), or None when every file is the one exported."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return f"{MANIFEST} missing"
    except (OSError, ValueError) as exc:
        return f"{MANIFEST} unreadable: {exc}"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(isinstance(f, dict) for f in files.values()):
        return f"{MANIFEST} lists no checksums (an earlier kgrag's export, or edited)"
    for name, listed in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} missing"
        if path.stat().st_size != listed.get("size"):
            return f"{name} is {path.stat().st_size} bytes, listed as {listed.get('size')}"
        if _sha256(path) != listed.get("sha256"):
            return f"{name} changed (its sha256 differs from {MANIFEST})"
    return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _export_onnx(model_dir: Path, out: Path) -> None:
    """The folder's transformer as one ONNX file: token ids (and their mask and types,
    as its tokenizer gives them) in, the last hidden states out, batch and length free."""
    offline()
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
    offline()
    import openvino

    openvino.save_model(openvino.convert_model(str(fp32)), str(out), compress_to_fp16=False)


def _quantise_openvino(fp32: Path, texts: list[str], tokenise: Tokenise, out: Path) -> None:
    """NNCF's static int8 for transformers: activations' ranges calibrated on ``texts``,
    tokenised by ``tokenise``."""
    offline()
    import nncf
    import openvino

    samples = [tokenise(texts[i:i + CALIBRATION_BATCH])
               for i in range(0, len(texts), CALIBRATION_BATCH)]
    quantised = nncf.quantize(openvino.convert_model(str(fp32)), nncf.Dataset(samples),
                              model_type=nncf.ModelType.TRANSFORMER,
                              subset_size=len(samples))
    openvino.save_model(quantised, str(out), compress_to_fp16=False)
