"""A bundled GGUF as a trainable PyTorch causal LM, on the CPU.

transformers reads GGUF files only through the ``gguf`` package, which kgrag does not
install; llama.cpp (installed) already ships everything needed instead: its vocabulary
(a vocab-only ``llama_cpp.Llama``) tokenizes and holds the chat template, ``gguf_*`` in
libggml-base lists the tensors, and its ``dequantize_row_*`` turn quantized blocks into
float32. The weights then fill a transformers model built from the file's metadata.

Only the LLaMA architecture (SmolLM2) is mapped; another architecture is a KgragError.
llama.cpp's converter permutes LLaMA's query and key rows for its rotary layout; they are
permuted back here, so the model computes what llama.cpp computes (checked against it in
tests/training/test_graph_llm.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import KgragError

SENTINEL = "\x00CONTENT\x00"


class _GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


@lru_cache(maxsize=1)
def _ggml() -> ctypes.CDLL:
    import llama_cpp

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    signatures = {
        "gguf_init_from_file": ([ctypes.c_char_p, _GgufInitParams], ctypes.c_void_p),
        "gguf_free": ([ctypes.c_void_p], None),
        "gguf_get_n_tensors": ([ctypes.c_void_p], ctypes.c_int64),
        "gguf_get_data_offset": ([ctypes.c_void_p], ctypes.c_size_t),
        "gguf_get_tensor_name": ([ctypes.c_void_p, ctypes.c_int64], ctypes.c_char_p),
        "gguf_get_tensor_type": ([ctypes.c_void_p, ctypes.c_int64], ctypes.c_int),
        "gguf_get_tensor_offset": ([ctypes.c_void_p, ctypes.c_int64], ctypes.c_size_t),
        "gguf_get_tensor_size": ([ctypes.c_void_p, ctypes.c_int64], ctypes.c_size_t),
        "ggml_type_name": ([ctypes.c_int], ctypes.c_char_p),
        "ggml_blck_size": ([ctypes.c_int], ctypes.c_int64),
        "ggml_type_size": ([ctypes.c_int], ctypes.c_size_t),
    }
    for name, (args, result) in signatures.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = result
    return lib


def read_tensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of the GGUF file as a flat float32 array, by its GGUF name."""
    lib = _ggml()
    ctx = lib.gguf_init_from_file(str(path).encode(), _GgufInitParams(True, None))
    if not ctx:
        raise KgragError(f"{path} is not a readable GGUF file")
    try:
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        base = lib.gguf_get_data_offset(ctx)
        out = {}
        for i in range(lib.gguf_get_n_tensors(ctx)):
            start = base + lib.gguf_get_tensor_offset(ctx, i)
            data = np.ascontiguousarray(raw[start:start + lib.gguf_get_tensor_size(ctx, i)])
            out[lib.gguf_get_tensor_name(ctx, i).decode()] = _to_float(
                lib, lib.gguf_get_tensor_type(ctx, i), data)
        return out
    finally:
        lib.gguf_free(ctx)


def _to_float(lib: ctypes.CDLL, kind: int, data: np.ndarray) -> np.ndarray:
    name = lib.ggml_type_name(kind).decode()
    if name == "f32":
        return data.view(np.float32).copy()
    if name == "f16":
        return data.view(np.float16).astype(np.float32)
    if name == "bf16":
        return (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    dequantize = getattr(lib, f"dequantize_row_{name}", None)
    if dequantize is None:
        raise KgragError(f"GGUF tensors of type {name} cannot be read")
    count = len(data) // lib.ggml_type_size(kind) * lib.ggml_blck_size(kind)
    out = np.empty(count, dtype=np.float32)
    dequantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    dequantize.restype = None
    dequantize(data.ctypes.data, out.ctypes.data, count)
    return out


@dataclass
class GgufTokenizer:
    """The GGUF's own vocabulary (llama.cpp) and chat template."""

    vocab: Any  # a vocab-only llama_cpp.Llama
    bos_id: int
    eos_id: int
    add_bos: bool
    template: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token markup (``<|im_end|>``) becomes its token."""
        return self.vocab.tokenize(text.encode(), add_bos=False, special=True) if text else []

    def decode(self, ids: list[int]) -> str:
        return self.vocab.detokenize(ids).decode("utf-8", errors="replace")

    def wrap(self) -> tuple[list[int], list[int]]:
        """The ids before and after a user message's content, ending where the assistant's
        turn begins (the chat template, or BOS alone where the file has none)."""
        start = [self.bos_id] if self.add_bos else []
        if not self.template:
            return start, []
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        text = env.from_string(self.template).render(
            messages=[{"role": "user", "content": SENTINEL}], add_generation_prompt=True,
            bos_token=self.decode([self.bos_id]), eos_token=self.decode([self.eos_id]))
        before, after = text.split(SENTINEL)
        before_ids = self.encode(before)
        if self.add_bos and before_ids[:1] != [self.bos_id]:
            before_ids = start + before_ids
        return before_ids, self.encode(after)


def load_tokenizer(path: Path) -> GgufTokenizer:
    from llama_cpp import Llama

    vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    meta = vocab.metadata
    return GgufTokenizer(vocab, vocab.token_bos(), vocab.token_eos(),
                         meta.get("tokenizer.ggml.add_bos_token", "false") == "true",
                         meta.get("tokenizer.chat_template", ""))


def load_causal_lm(path: Path):
    """A float32 transformers causal LM holding the GGUF's weights (dequantized)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    meta = load_tokenizer(path).vocab.metadata
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise KgragError(f"{path.name}: the Graph LLM supports LLaMA-architecture GGUFs "
                         f"(smollm2-135m), not {arch!r}")
    tensors = read_tensors(path)
    heads, kv_heads = int(meta["llama.attention.head_count"]), int(
        meta["llama.attention.head_count_kv"])
    config = LlamaConfig(
        vocab_size=len(tensors["token_embd.weight"]) // int(meta["llama.embedding_length"]),
        hidden_size=int(meta["llama.embedding_length"]),
        intermediate_size=int(meta["llama.feed_forward_length"]),
        num_hidden_layers=int(meta["llama.block_count"]), num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        rms_norm_eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
        rope_theta=float(meta.get("llama.rope.freq_base", 10000.0)),
        max_position_embeddings=int(meta["llama.context_length"]),
        tie_word_embeddings="output.weight" not in tensors,
        bos_token_id=int(meta["tokenizer.ggml.bos_token_id"]),
        eos_token_id=int(meta["tokenizer.ggml.eos_token_id"]))
    model = LlamaForCausalLM(config).float().eval()
    state = {}
    for name, param in model.state_dict().items():
        gguf = _gguf_name(name)
        weight = tensors[gguf if gguf in tensors else "token_embd.weight"].reshape(param.shape)
        if name.endswith("q_proj.weight"):
            weight = _unpermute(weight, heads)
        elif name.endswith("k_proj.weight"):
            weight = _unpermute(weight, kv_heads)
        state[name] = torch.from_numpy(np.ascontiguousarray(weight))
    model.load_state_dict(state)
    model.requires_grad_(False)
    return model


_LAYER = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
          "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
          "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


def _gguf_name(name: str) -> str:
    """The GGUF tensor behind a transformers LLaMA parameter."""
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    if name == "lm_head.weight":
        return "output.weight"  # absent where tied to the embeddings
    _, _, index, rest = name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{index}.{_LAYER[module]}.{kind}"


def _unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head interleaving of the rotary halves of q/k rows."""
    rows, cols = weight.shape
    return weight.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)
