"""A float64 forward pass for every model family llamay runs, written after llama.cpp's graphs.

Plain and slow on purpose: one function per block, the whole sequence at once, no KV cache, no
quantized activations. It is the spec the engine is checked against, so each llama.cpp
behaviour it copies says where it comes from. Sections follow the data: the blocks, then the
model that composes them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

import llamay.gguf
from llamay.models.hparams import YARN_BETA_FAST, YARN_BETA_SLOW, HParams, from_metadata

from reference import rope as rope_mod

# ----------------------------------------------------------------------------------------------
# Blocks


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """ggml_rms_norm then a multiply: x / sqrt(mean(x²) + eps) * weight, over the last axis.

    Gemma's (1 + weight) is already folded into the stored weights by llama.cpp's converter.
    """
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """ggml_gelu: the tanh approximation (ggml's CPU path also rounds x to fp16 for a table;
    the reference computes it exactly)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * x * (1.0 + 0.044715 * x * x)))


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh}


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    """Gemma 2's logit soft-cap: cap * tanh(x / cap)."""
    return cap * np.tanh(x / cap)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    positions: np.ndarray,
    scale: float,
    cap: float,
    window: int,
) -> np.ndarray:
    """Causal multi-head attention with grouped KV heads, over the whole sequence.

    q (T, n_head, d_k), k (T, n_head_kv, d_k), v (T, n_head_kv, d_v) -> (T, n_head * d_v).
    Query head h reads KV head h // (n_head / n_head_kv): ggml_mul_mat broadcasts K and V over
    consecutive query heads. Scores are q·k * scale, soft-capped when cap > 0 (llama-graph.cpp
    build_attn_mha caps kq, then ggml_soft_max_ext masks; Gemma 2 passes kq_scale 1 and scales
    q beforehand, which is the same number). A key at p0 is visible from p1 iff p0 <= p1 and,
    on sliding-window layers, p1 - p0 < window (llama_hparams::is_masked_swa, STANDARD).
    """
    group = q.shape[1] // k.shape[1]
    # Heads first: (n_head, T, d), with each KV head repeated for its group of query heads.
    q = q.transpose(1, 0, 2)
    k = np.repeat(k, group, axis=1).transpose(1, 0, 2)
    v = np.repeat(v, group, axis=1).transpose(1, 0, 2)
    scores = (q @ k.transpose(0, 2, 1)) * scale
    if cap:
        scores = softcap(scores, cap)
    distance = positions[:, None] - positions[None, :]
    visible = distance >= 0
    if window:
        visible &= distance < window
    scores = np.where(visible, scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = (probs @ v).transpose(1, 0, 2)
    return out.reshape(out.shape[0], -1)


# ----------------------------------------------------------------------------------------------
# The model


class ReferenceModel:
    """A GGUF model run in float64 numpy: `logits(token_ids)` for a whole sequence from 0.

    `n_ctx` is the context size llama.cpp would be given; it only picks Phi-3's LongRoPE
    factors (long when n_ctx exceeds the original training context), as llama.cpp does.
    Weights are dequantized once, on first use, and kept as float64.
    """

    def __init__(
        self, model: str | os.PathLike[str] | llamay.gguf.GGUFFile, n_ctx: int | None = None
    ) -> None:
        self.file = model if isinstance(model, llamay.gguf.GGUFFile) else llamay.gguf.read(model)
        self.hparams: HParams = from_metadata(self.file.metadata)
        self.n_ctx = self.hparams.n_ctx_train if n_ctx is None else n_ctx
        self._weights: dict[str, np.ndarray] = {}

    def has(self, name: str) -> bool:
        return name in self.file.tensors

    def weight(self, name: str) -> np.ndarray:
        """A tensor, dequantized to float64, in numpy order (rows are output features)."""
        if name not in self._weights:
            self._weights[name] = self.file.tensors[name].dequantize().astype(np.float64)
        return self._weights[name]

    def linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """x @ W.T, plus the bias when the file has one (Qwen 2's q/k/v; optional in Llama)."""
        y = x @ self.weight(f"{name}.weight").T
        if self.has(f"{name}.bias"):
            y = y + self.weight(f"{name}.bias")
        return y

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """Logits (n_tokens, n_vocab) for token_ids at positions 0, 1, 2, ..."""
        hp = self.hparams
        positions = np.arange(len(token_ids))
        x = self.weight("token_embd.weight")[np.asarray(token_ids, dtype=np.int64)]
        if hp.family.embedding_scale:
            x = x * math.sqrt(hp.n_embd)
        for il in range(hp.n_layer):
            x = self.block(il, x, positions)
        x = rms_norm(x, self.weight("output_norm.weight"), hp.norm_eps)
        # Tied output: llama.cpp falls back to token_embd when output.weight is absent, and
        # Gemma's graph uses token_embd whether or not it is.
        tied = hp.family.output_is_embedding or not self.has("output.weight")
        logits = x @ self.weight("token_embd.weight" if tied else "output.weight").T
        if hp.final_softcap:
            logits = softcap(logits, hp.final_softcap)
        return logits

    def block(self, il: int, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """One transformer layer: pre-norm attention, then pre-norm FFN, each added back."""
        hp, family = self.hparams, self.hparams.family
        blk = f"blk.{il}"
        h = rms_norm(x, self.weight(f"{blk}.attn_norm.weight"), hp.norm_eps)
        q, k, v = self.qkv(il, h)
        if family.qk_norm:
            q = rms_norm(q, self.weight(f"{blk}.attn_q_norm.weight"), hp.norm_eps)
            k = rms_norm(k, self.weight(f"{blk}.attn_k_norm.weight"), hp.norm_eps)
        layer_rope = self.rope(il)
        q = rope_mod.apply(q, layer_rope, positions)
        k = rope_mod.apply(k, layer_rope, positions)
        window = hp.sliding_window if hp.swa_layers[il] else 0
        a = attention(q, k, v, positions, hp.attn_scale, hp.attn_softcap, window)
        a = self.linear(a, f"{blk}.attn_output")
        if family.post_norms:
            a = rms_norm(a, self.weight(f"{blk}.post_attention_norm.weight"), hp.norm_eps)
        x = x + a
        h = rms_norm(x, self.weight(f"{blk}.ffn_norm.weight"), hp.norm_eps)
        f = self.ffn(il, h)
        if family.post_norms:
            f = rms_norm(f, self.weight(f"{blk}.post_ffw_norm.weight"), hp.norm_eps)
        return x + f

    def qkv(self, il: int, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Project to per-head q, k, v: from attn_q/k/v, or split from a fused attn_qkv
        (Phi-3: rows [q; k; v], as llama.cpp's build_qkv views them)."""
        hp = self.hparams
        n_head, n_head_kv = hp.n_head[il], hp.n_head_kv[il]
        n_q, n_k = n_head * hp.head_dim_k, n_head_kv * hp.head_dim_k
        blk = f"blk.{il}"
        if self.has(f"{blk}.attn_qkv.weight"):
            q, k, v = np.split(self.linear(h, f"{blk}.attn_qkv"), [n_q, n_q + n_k], axis=-1)
        else:
            q = self.linear(h, f"{blk}.attn_q")
            k = self.linear(h, f"{blk}.attn_k")
            v = self.linear(h, f"{blk}.attn_v")
        n_tokens = h.shape[0]
        return (
            q.reshape(n_tokens, n_head, hp.head_dim_k),
            k.reshape(n_tokens, n_head_kv, hp.head_dim_k),
            v.reshape(n_tokens, n_head_kv, hp.head_dim_v),
        )

    def ffn(self, il: int, h: np.ndarray) -> np.ndarray:
        """Gated FFN: down(act(gate(h)) * up(h)). Phi-3 stacks gate over up in ffn_up
        (ggml_swiglu takes the first half as the gate)."""
        blk = f"blk.{il}"
        act = ACTIVATIONS[self.hparams.family.activation]
        if self.hparams.family.fused_gate_up:
            gate, up = np.split(self.linear(h, f"{blk}.ffn_up"), 2, axis=-1)
        else:
            gate, up = self.linear(h, f"{blk}.ffn_gate"), self.linear(h, f"{blk}.ffn_up")
        return self.linear(act(gate) * up, f"{blk}.ffn_down")

    def rope(self, il: int) -> rope_mod.Rope:
        """Layer il's RoPE. Sliding layers may use their own base and scale (Gemma 3: 10000, 1).

        Frequency factors (llama_model::get_rope_factors): rope_freqs.weight when the file has it
        (Llama 3.1 scaling); else Phi-3's rope_factors_long when n_ctx exceeds the original
        context, rope_factors_short otherwise; else none.
        """
        hp = self.hparams
        swa = hp.swa_layers[il]
        if self.has("rope_freqs.weight"):
            factors_name = "rope_freqs.weight"
        elif self.n_ctx > hp.n_ctx_orig:
            factors_name = "rope_factors_long.weight"
        else:
            factors_name = "rope_factors_short.weight"
        return rope_mod.Rope(
            n_rot=hp.n_rot,
            neox=hp.family.rope_neox,
            freq_base=hp.swa_freq_base if swa else hp.freq_base,
            freq_scale=hp.swa_freq_scale if swa else hp.freq_scale,
            freq_factors=self.weight(factors_name) if self.has(factors_name) else None,
            ext_factor=hp.ext_factor,
            attn_factor=hp.attn_factor,
            beta_fast=YARN_BETA_FAST,
            beta_slow=YARN_BETA_SLOW,
            n_ctx_orig=hp.n_ctx_orig,
        )
