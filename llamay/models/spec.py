"""A model's blocks as the forward step runs them: which GGUF tensor plays which part in each
layer, checked against the hyperparameters, and the numbers that go with them.

Every family shares this: the family files only switch parts on or off (post-norms, q/k norms,
fused projections, a tied output...). Weight matrices stay zero-copy views of the file; only
the small vectors (norms, biases, RoPE factors) are converted to float32 here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llamay.errors import ModelFormatError
from llamay.gguf import GGUFFile, Tensor
from llamay.models.hparams import YARN_BETA_FAST, YARN_BETA_SLOW, HParams


@dataclass(frozen=True)
class Linear:
    """A weight matrix of n_rows outputs by n_cols inputs, as the file stores it, and its bias."""

    name: str
    tensor: Tensor
    n_rows: int
    n_cols: int
    bias: np.ndarray | None  # float32 (n_rows,)


@dataclass(frozen=True)
class Layer:
    attn_norm: np.ndarray
    q: Linear  # with fused_qkv: the rows [q; k; v]
    k: Linear | None
    v: Linear | None
    q_norm: np.ndarray | None
    k_norm: np.ndarray | None
    o: Linear
    post_attn_norm: np.ndarray | None
    ffn_norm: np.ndarray
    gate: Linear | None  # None with a fused [gate; up] in `up`
    up: Linear
    down: Linear
    post_ffn_norm: np.ndarray | None
    n_head: int
    n_head_kv: int
    n_ff: int
    window: int  # 0: attends to every earlier position
    rope: int  # index into ModelSpec.ropes

    @property
    def fused_qkv(self) -> bool:
        return self.k is None

    @property
    def fused_gate_up(self) -> bool:
        return self.gate is None


@dataclass(frozen=True)
class Rope:
    """One RoPE configuration, as ggml_rope_ext receives it (see tests/reference/rope.py)."""

    n_rot: int
    neox: bool
    freq_base: float
    freq_scale: float
    ext_factor: float
    attn_factor: float
    beta_fast: float
    beta_slow: float
    n_ctx_orig: int
    freq_factors: np.ndarray | None  # float32 (n_rot / 2,)


@dataclass(frozen=True)
class ModelSpec:
    hparams: HParams
    n_vocab: int
    head_dim: int
    embd_scale: float  # 0: none
    token_embd: Tensor
    output_norm: np.ndarray
    output: Linear
    ropes: tuple[Rope, ...]
    layers: tuple[Layer, ...]


def model_spec(gg: GGUFFile, hp: HParams, n_ctx: int) -> ModelSpec:
    """The blocks of the model in `gg`; `n_ctx` picks Phi-3's long or short RoPE factors."""
    tensors = _Tensors(gg)
    if hp.head_dim_k != hp.head_dim_v:
        raise ModelFormatError(
            f"{gg.path}: key heads of {hp.head_dim_k} and value heads of {hp.head_dim_v} "
            "dimensions: every supported family has equal ones"
        )
    embd = tensors.matrix("token_embd.weight", None, hp.n_embd)
    n_vocab = embd.shape[1]
    vocabulary = gg.metadata.get("tokenizer.ggml.tokens")
    if isinstance(vocabulary, (list, tuple, np.ndarray)) and len(vocabulary) != n_vocab:
        # A token id the tokenizer makes must have an embedding row, and a sampled row a token.
        raise ModelFormatError(
            f"{gg.path}: the vocabulary has {len(vocabulary)} tokens but the embedding has "
            f"{n_vocab} rows; they must be equal"
        )
    tied = hp.family.output_is_embedding or "output.weight" not in gg.tensors
    output = tensors.linear("token_embd" if tied else "output", n_vocab, hp.n_embd)

    factors = _rope_factors(tensors, hp, n_ctx)
    ropes = [_rope(gg, hp, hp.freq_base, hp.freq_scale, factors)]
    if any(hp.swa_layers) and (hp.swa_freq_base, hp.swa_freq_scale) != (
        hp.freq_base,
        hp.freq_scale,
    ):
        ropes.append(_rope(gg, hp, hp.swa_freq_base, hp.swa_freq_scale, factors))

    layers = tuple(_layer(tensors, hp, il, len(ropes) - 1) for il in range(hp.n_layer))
    return ModelSpec(
        hparams=hp,
        n_vocab=n_vocab,
        head_dim=hp.head_dim_k,
        # ggml_scale by sqrtf(n_embd): the fp32 square root, as llama.cpp computes it
        embd_scale=float(np.sqrt(np.float32(hp.n_embd))) if hp.family.embedding_scale else 0.0,
        token_embd=embd,
        output_norm=tensors.vector("output_norm.weight", hp.n_embd),
        output=output,
        ropes=tuple(ropes),
        layers=layers,
    )


def _layer(tensors: _Tensors, hp: HParams, il: int, swa_rope: int) -> Layer:
    family = hp.family
    blk = f"blk.{il}"
    n_head, n_head_kv, d = hp.n_head[il], hp.n_head_kv[il], hp.head_dim_k
    if n_head_kv < 1 or n_head % n_head_kv:
        raise ModelFormatError(
            f"{tensors.path}: layer {il} has {n_head} query heads for {n_head_kv} KV heads; "
            "the query heads must split evenly over the KV heads"
        )
    n_q, n_kv = n_head * d, n_head_kv * d
    if tensors.has(f"{blk}.attn_qkv.weight"):
        q, k, v = tensors.linear(f"{blk}.attn_qkv", n_q + 2 * n_kv, hp.n_embd), None, None
    else:
        q = tensors.linear(f"{blk}.attn_q", n_q, hp.n_embd)
        k = tensors.linear(f"{blk}.attn_k", n_kv, hp.n_embd)
        v = tensors.linear(f"{blk}.attn_v", n_kv, hp.n_embd)
    down_tensor = tensors.matrix(f"{blk}.ffn_down.weight", None, None)
    n_ff = down_tensor.shape[0]
    if family.fused_gate_up:
        gate, up = None, tensors.linear(f"{blk}.ffn_up", 2 * n_ff, hp.n_embd)
    else:
        gate = tensors.linear(f"{blk}.ffn_gate", n_ff, hp.n_embd)
        up = tensors.linear(f"{blk}.ffn_up", n_ff, hp.n_embd)
    return Layer(
        attn_norm=tensors.vector(f"{blk}.attn_norm.weight", hp.n_embd),
        q=q,
        k=k,
        v=v,
        q_norm=tensors.vector(f"{blk}.attn_q_norm.weight", d) if family.qk_norm else None,
        k_norm=tensors.vector(f"{blk}.attn_k_norm.weight", d) if family.qk_norm else None,
        o=tensors.linear(f"{blk}.attn_output", hp.n_embd, n_q),
        post_attn_norm=(
            tensors.vector(f"{blk}.post_attention_norm.weight", hp.n_embd)
            if family.post_norms
            else None
        ),
        ffn_norm=tensors.vector(f"{blk}.ffn_norm.weight", hp.n_embd),
        gate=gate,
        up=up,
        down=tensors.linear(f"{blk}.ffn_down", hp.n_embd, n_ff),
        post_ffn_norm=(
            tensors.vector(f"{blk}.post_ffw_norm.weight", hp.n_embd) if family.post_norms else None
        ),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        window=hp.sliding_window if hp.swa_layers[il] else 0,
        rope=swa_rope if hp.swa_layers[il] else 0,
    )


def _rope_factors(tensors: _Tensors, hp: HParams, n_ctx: int) -> np.ndarray | None:
    """Frequency factors (llama_model::get_rope_factors): rope_freqs when the file has it (Llama
    3.1); else Phi-3's rope_factors_long when n_ctx exceeds the original context, its
    rope_factors_short otherwise; else none. Every layer uses the same."""
    if tensors.has("rope_freqs.weight"):
        name = "rope_freqs.weight"
    elif n_ctx > hp.n_ctx_orig:
        name = "rope_factors_long.weight"
    else:
        name = "rope_factors_short.weight"
    return tensors.vector(name, hp.n_rot // 2) if tensors.has(name) else None


def _rope(gg: GGUFFile, hp: HParams, base: float, scale: float, factors: np.ndarray | None) -> Rope:
    if hp.n_rot > hp.head_dim_k or hp.n_rot % 2:
        raise ModelFormatError(
            f"{gg.path}: RoPE over {hp.n_rot} dimensions of {hp.head_dim_k}-dimensional heads"
        )
    return Rope(
        n_rot=hp.n_rot,
        neox=hp.family.rope_neox,
        freq_base=base,
        freq_scale=scale,
        ext_factor=hp.ext_factor,
        attn_factor=hp.attn_factor,
        beta_fast=YARN_BETA_FAST,
        beta_slow=YARN_BETA_SLOW,
        n_ctx_orig=hp.n_ctx_orig,
        freq_factors=factors,
    )


class _Tensors:
    """The file's tensors by name, with shape checks that name the tensor at fault."""

    def __init__(self, gg: GGUFFile) -> None:
        self.path = gg.path
        self._tensors = gg.tensors

    def has(self, name: str) -> bool:
        return name in self._tensors

    def get(self, name: str) -> Tensor:
        if name not in self._tensors:
            raise ModelFormatError(f"{self.path}: the model has no tensor {name}")
        return self._tensors[name]

    def matrix(self, name: str, n_rows: int | None, n_cols: int | None) -> Tensor:
        """A 2-D tensor of n_rows outputs by n_cols inputs (GGUF shape (n_cols, n_rows))."""
        t = self.get(name)
        ok = len(t.shape) == 2 and all(
            want is None or got == want for got, want in zip(t.shape, (n_cols, n_rows), strict=True)
        )
        if not ok:
            raise ModelFormatError(
                f"{self.path}: tensor {name} has shape {list(t.shape)}; expected "
                f"[{n_cols or 'any'}, {n_rows or 'any'}] (GGUF order)"
            )
        return t

    def vector(self, name: str, n: int) -> np.ndarray:
        t = self.get(name)
        if math.prod(t.shape) != n:
            raise ModelFormatError(
                f"{self.path}: tensor {name} has shape {list(t.shape)}; expected {n} values"
            )
        return np.ascontiguousarray(t.dequantize().reshape(n), dtype=np.float32)

    def linear(self, stem: str, n_rows: int, n_cols: int) -> Linear:
        weight = self.matrix(f"{stem}.weight", n_rows, n_cols)
        bias_name = f"{stem}.bias"
        bias = self.vector(bias_name, n_rows) if self.has(bias_name) else None
        return Linear(f"{stem}.weight", weight, n_rows, n_cols, bias)
