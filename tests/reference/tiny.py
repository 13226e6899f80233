"""Tiny random models of every family, written as GGUF files, to hold the engine to the reference.

With F32 weights (and F32 KV in the engine) the engine quantizes nothing, so it must agree with
the float64 reference to fp32 rounding: a wrong RoPE variant, window, norm or soft-cap shows up
as an error of order one, far above that. Quantized files exercise the integer kernels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from llamay import gguf
from llamay.models.registry import FAMILIES

N_VOCAB = 64
N_EMBD = 64
HEAD_DIM = 16
N_FF = 96
CONTEXT = 256


def vocabulary() -> dict[str, Any]:
    """A SentencePiece vocabulary of N_VOCAB tokens: <unk>, <s>, </s> and single letters."""
    pieces = ["<unk>", "<s>", "</s>"] + [f"▁{chr(97 + i % 26)}{i // 26 or ''}" for i in range(61)]
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": pieces,
        "tokenizer.ggml.scores": np.zeros(N_VOCAB, dtype=np.float32),
        "tokenizer.ggml.token_type": np.array([2, 3, 3] + [1] * 61, dtype=np.int32),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }


def write_tiny(
    path: Path,
    arch: str,
    *,
    n_layer: int = 3,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = HEAD_DIM,
    weight_type: str = "F32",
    metadata: dict[str, Any] | None = None,
    seed: int = 0,
) -> Path:
    """A random model of architecture `arch` with every tensor its family uses (biases on q/k/v
    for qwen2), weights of `weight_type`, extra `metadata` on top of the defaults."""
    family = FAMILIES[arch]
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int, scale: float = 0.25) -> Any:
        w = (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols) * 4).astype(np.float32)
        return w if weight_type == "F32" else (weight_type, w)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    n_q, n_kv = n_head * head_dim, n_head_kv * head_dim
    tensors: dict[str, Any] = {
        "token_embd.weight": matrix(N_VOCAB, N_EMBD, 1.0),
        "output_norm.weight": norm(N_EMBD),
    }
    if not family.output_is_embedding:
        tensors["output.weight"] = matrix(N_VOCAB, N_EMBD)
    for il in range(n_layer):
        blk = f"blk.{il}"
        tensors[f"{blk}.attn_norm.weight"] = norm(N_EMBD)
        if arch == "phi3":
            tensors[f"{blk}.attn_qkv.weight"] = matrix(n_q + 2 * n_kv, N_EMBD)
        else:
            tensors[f"{blk}.attn_q.weight"] = matrix(n_q, N_EMBD)
            tensors[f"{blk}.attn_k.weight"] = matrix(n_kv, N_EMBD)
            tensors[f"{blk}.attn_v.weight"] = matrix(n_kv, N_EMBD)
        if arch == "qwen2":
            for name, n in (("attn_q", n_q), ("attn_k", n_kv), ("attn_v", n_kv)):
                tensors[f"{blk}.{name}.bias"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
        if family.qk_norm:
            tensors[f"{blk}.attn_q_norm.weight"] = norm(head_dim)
            tensors[f"{blk}.attn_k_norm.weight"] = norm(head_dim)
        tensors[f"{blk}.attn_output.weight"] = matrix(N_EMBD, n_q)
        tensors[f"{blk}.ffn_norm.weight"] = norm(N_EMBD)
        if family.fused_gate_up:
            tensors[f"{blk}.ffn_up.weight"] = matrix(2 * N_FF, N_EMBD)
        else:
            tensors[f"{blk}.ffn_gate.weight"] = matrix(N_FF, N_EMBD)
            tensors[f"{blk}.ffn_up.weight"] = matrix(N_FF, N_EMBD)
        tensors[f"{blk}.ffn_down.weight"] = matrix(N_EMBD, N_FF)
        if family.post_norms:
            tensors[f"{blk}.post_attention_norm.weight"] = norm(N_EMBD)
            tensors[f"{blk}.post_ffw_norm.weight"] = norm(N_EMBD)
    meta = {
        "general.architecture": arch,
        f"{arch}.context_length": CONTEXT,
        f"{arch}.embedding_length": N_EMBD,
        f"{arch}.block_count": n_layer,
        f"{arch}.feed_forward_length": N_FF,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        **vocabulary(),
        **(metadata or {}),
    }
    return gguf.write(path, meta, tensors)
