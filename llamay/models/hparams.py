"""A model's hyperparameters, read from GGUF metadata the way llama.cpp reads them.

Shared by every family: the family files only say how an architecture differs (family.py);
this module reads the numbers and applies llama.cpp's per-architecture quirks, each commented.

Sources: llama.cpp src/llama-model.cpp (load_hparams: the generic keys, then one `case` per
architecture), src/llama-hparams.cpp (set_swa_pattern, is_masked_swa), src/llama-context.cpp
(the context parameters derived from them: YaRN's ext_factor and attention factor), and the
graphs in src/models/<arch>.cpp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from llamay.errors import ModelFormatError
from llamay.models.family import POOLINGS, Family
from llamay.models.registry import family_of

# llama_context's defaults for YaRN (common_params yarn_beta_fast / yarn_beta_slow).
YARN_BETA_FAST = 32.0
YARN_BETA_SLOW = 1.0
# Bounds far past any real model, so that a hostile file cannot ask for absurd allocations
# (a tuple per layer, a KV page of 2**40 bytes) before the tensor checks would refuse it.
_MAX_LAYERS = 4096
_MAX_HEADS = 1 << 16
_MAX_DIM = 1 << 20
_MAX_CONTEXT = 1 << 30


@dataclass(frozen=True)
class HParams:
    """Everything the forward pass needs besides the weights."""

    arch: str
    family: Family
    n_embd: int
    n_layer: int
    n_ctx_train: int
    n_head: tuple[int, ...]  # per layer: GGUF allows an array in place of one number
    n_head_kv: tuple[int, ...]
    head_dim_k: int
    head_dim_v: int
    norm_eps: float  # of the family's norm (RMS or LayerNorm); query/key RMS norms use it too
    attn_scale: float  # multiplies q·k before the soft-cap and the softmax
    embd_scale: float  # multiplies the token embeddings (1: none)
    residual_scale: float  # multiplies attention and FFN outputs before the residual adds
    logit_scale: float  # multiplies the logits (1: none)
    attn_softcap: float  # 0: none
    final_softcap: float  # 0: none
    sliding_window: int  # 0: none
    swa_layers: tuple[bool, ...]
    # RoPE, as llama_context hands it to every layer (sliding layers may differ: swa_*)
    use_rope: bool  # False: no layer rotates (Granite with rope.scaling.finetuned = false)
    n_rot: int
    freq_base: float
    freq_scale: float
    swa_freq_base: float
    swa_freq_scale: float
    ext_factor: float
    attn_factor: float
    swa_ext_factor: float
    swa_attn_factor: float
    n_ctx_orig: int
    # mixture of experts (0: a dense FFN); a shared expert of n_ff_shexp (0: none)
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_shexp: int = 0
    # encoders: attention over the whole sequence, and how an embedding is pooled (POOLINGS)
    causal: bool = True
    pooling: str = "none"


def from_metadata(metadata: dict[str, Any]) -> HParams:
    """Read the hyperparameters of a model from its GGUF metadata."""
    arch = metadata.get("general.architecture")
    family = family_of(arch)
    read = _Reader(metadata, arch)
    get = read.get

    n_embd = read.count("embedding_length", high=_MAX_DIM)
    n_layer = read.count("block_count", high=_MAX_LAYERS)
    n_ctx_train = read.count("context_length", high=_MAX_CONTEXT)
    n_head = read.per_layer("attention.head_count", n_layer)
    # n_head_kv is optional and defaults to n_head.
    n_head_kv = read.per_layer("attention.head_count_kv", n_layer, n_head)
    # n_embd_head_k/v default to n_embd / n_head of layer 0; n_rot defaults to n_embd_head_k.
    head_dim_k = read.count("attention.key_length", n_embd // n_head[0], high=_MAX_DIM)
    head_dim_v = read.count("attention.value_length", n_embd // n_head[0], high=_MAX_DIM)
    n_rot = read.count("rope.dimension_count", head_dim_k, low=0, high=_MAX_DIM)

    # RoPE scaling: "linear" when unspecified; the factor is stored as its inverse, freq_scale.
    freq_base = read.number("rope.freq_base", 10000.0, positive=True)
    scaling_type = str(get("rope.scaling.type", "linear"))
    if scaling_type not in ("none", "linear", "yarn", "longrope"):
        raise ModelFormatError(f"unknown RoPE scaling type {scaling_type!r}")
    factor = read.number("rope.scaling.factor", read.number("rope.scale_linear", 0.0))
    if factor == 0.0 or scaling_type == "none":
        factor = 1.0
    if factor < 0:
        raise ModelFormatError(f"GGUF metadata {arch}.rope.scaling.factor is negative ({factor})")
    freq_scale = 1.0 / factor
    n_ctx_orig = read.count("rope.scaling.original_context_length", n_ctx_train, high=_MAX_CONTEXT)
    # llama_context: YaRN's ext_factor is 1 exactly when the scaling type is yarn; its attention
    # factor is YaRN's mscale 1 + 0.1 ln(factor), divided by the same amount because ggml's
    # rope_yarn multiplies that in again; the file's rope.scaling.attn_factor multiplies both.
    ext_factor = 1.0 if scaling_type == "yarn" else 0.0
    attn_factor = read.number("rope.scaling.attn_factor", 1.0)
    if ext_factor:
        yarn_mscale = 1.0 if factor <= 1.0 else 1.0 + 0.1 * math.log(factor)
        divisor = 1.0 + 0.1 * math.log(factor)
        if divisor <= 0:
            raise ModelFormatError(
                f"GGUF metadata {arch}.rope.scaling.factor {factor} is too small"
            )
        attn_factor *= yarn_mscale / divisor

    sliding_window = read.count(
        "attention.sliding_window", family.swa_default_window, low=-(2**31), high=_MAX_CONTEXT
    )
    period = family.swa_period
    pattern = metadata.get(f"{arch}.attention.sliding_window_pattern")
    if family.swa_period_key and isinstance(pattern, (int, np.integer)):
        period = read.count("attention.sliding_window_pattern", low=0, high=_MAX_LAYERS)
    if family.swa_period == 0 or sliding_window <= 0:
        sliding_window = 0
    # set_swa_pattern(n): n == 0 makes every layer slide
    swa_layers = tuple(
        sliding_window > 0 and (period == 0 or il % period < period - 1) for il in range(n_layer)
    )

    scales = family.scales
    # llama.cpp reads a missing multiplier as 0 and skips a multiplier of 0.
    if scales.attention is not None and read.number(scales.attention, 0.0):
        attn_scale = read.number(scales.attention)
    elif family.layers_of_27b and n_layer == family.layers_of_27b:
        if n_embd < n_head[0]:
            raise ModelFormatError(f"{arch}: {n_head[0]} heads for an embedding of {n_embd}")
        attn_scale = 1.0 / math.sqrt(n_embd // n_head[0])
    else:
        attn_scale = 1.0 / math.sqrt(head_dim_k)
    if family.embedding_sqrt_scale:
        # ggml_scale by sqrtf(n_embd): the fp32 square root, as llama.cpp computes it
        embd_scale = float(np.sqrt(np.float32(n_embd)))
    else:
        embd_scale = _scale(read, scales.embedding)
    # Granite scales the logits by 1.0f / f_logit_scale, the quotient in fp32; Cohere by
    # f_logit_scale itself.
    logit_scale = float(np.float32(1.0) / np.float32(_scale(read, scales.logit)))
    if scales.logit_multiplier is not None:
        logit_scale = float(np.float32(_scale(read, scales.logit_multiplier)))

    # Gemma 3 rotates sliding layers with base 10000, unscaled; gpt-oss with rope.freq_base_swa
    # where the file has it; OLMo 3 with the global base, no scaling and no YaRN.
    swa_freq_base, swa_freq_scale = freq_base, freq_scale
    swa_ext_factor, swa_attn_factor = ext_factor, attn_factor
    if family.swa_rope_base is not None:
        swa_freq_base, swa_freq_scale = family.swa_rope_base, 1.0
    if family.swa_rope_base_key:
        swa_freq_base = read.number("rope.freq_base_swa", freq_base, positive=True)
    if family.swa_rope_unscaled:
        swa_freq_scale, swa_ext_factor, swa_attn_factor = 1.0, 0.0, 1.0
    # Granite: RoPE on unless rope.scaling.finetuned says false.
    use_rope = not family.rope_switch or bool(get("rope.scaling.finetuned", True))
    use_rope = use_rope and family.positions == "rope"  # BERT: learned absolute positions

    n_expert = n_expert_used = n_ff_shexp = 0
    experts = family.experts
    if experts is not None:
        n_expert = read.count(
            "expert_count", 0 if experts.optional else None, low=0, high=_MAX_HEADS
        )
        if n_expert:
            n_expert_used = read.count("expert_used_count", high=n_expert)
            if not 0 < n_expert_used <= n_expert:
                raise ModelFormatError(
                    f"{arch}.expert_used_count is {n_expert_used} for {n_expert} experts"
                )
            if experts.shared == "gated":  # Qwen 2 MoE: the dense width when the key is absent
                n_ff_shexp = (
                    read.count("expert_shared_feed_forward_length", 0, low=0, high=_MAX_DIM) or -1
                )
            elif experts.shared == "plain":
                n_ff_shexp = read.count(
                    "expert_shared_feed_forward_length", 0, low=0, high=_MAX_DIM
                )

    # llama.cpp: attention.causal (encoders read it; absent: the architecture's default) and
    # pooling_type, a llama_pooling_type number
    causal = bool(get("attention.causal", family.causal)) if not family.causal else True
    pooling_id = read.count("pooling_type", POOLINGS.index(family.pooling), low=0, high=2**32)
    if pooling_id >= len(POOLINGS):
        raise ModelFormatError(f"GGUF metadata {arch}.pooling_type = {pooling_id} is unknown")

    return HParams(
        arch=arch,
        family=family,
        n_embd=n_embd,
        n_layer=n_layer,
        n_ctx_train=n_ctx_train,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        norm_eps=read.number(
            "attention.layer_norm_epsilon"
            if family.norm == "layer"
            else "attention.layer_norm_rms_epsilon",
            low=0.0,
        ),
        attn_scale=attn_scale,
        embd_scale=embd_scale,
        residual_scale=_scale(read, scales.residual),
        logit_scale=logit_scale,
        attn_softcap=_softcap(read, "attn_logit_softcapping", family.attn_softcap),
        final_softcap=_softcap(read, "final_logit_softcapping", family.final_softcap),
        sliding_window=sliding_window,
        swa_layers=swa_layers,
        use_rope=use_rope,
        n_rot=n_rot,
        freq_base=freq_base,
        freq_scale=freq_scale,
        swa_freq_base=swa_freq_base,
        swa_freq_scale=swa_freq_scale,
        ext_factor=ext_factor,
        attn_factor=attn_factor,
        swa_ext_factor=swa_ext_factor,
        swa_attn_factor=swa_attn_factor,
        n_ctx_orig=n_ctx_orig,
        n_expert=n_expert,
        n_expert_used=n_expert_used,
        n_ff_shexp=n_ff_shexp,
        causal=causal,
        pooling=POOLINGS[pooling_id],
    )


class _Reader:
    """The metadata of one architecture, read as numbers that are checked: a GGUF file is
    untrusted, and a zero, a negative or an absurd count (0 heads, 2**60 layers) would otherwise
    surface as a ZeroDivisionError, an IndexError or a huge allocation instead of a
    ModelFormatError naming the key."""

    def __init__(self, metadata: dict[str, Any], arch: str) -> None:
        self.metadata = metadata
        self.arch = arch

    def get(self, key: str, default: Any = None) -> Any:
        value = self.metadata.get(f"{self.arch}.{key}", default)
        if value is None:
            raise ModelFormatError(f"GGUF metadata lacks {self.arch}.{key}")
        return value

    def count(self, key: str, default: Any = None, *, low: int = 1, high: int) -> int:
        return self._integer(key, self.get(key, default), low, high)

    def per_layer(self, key: str, n_layer: int, default: Any = None) -> tuple[int, ...]:
        """One count per layer: GGUF allows an array in place of one number."""
        value = self.get(key, default)
        if isinstance(value, (np.ndarray, list, tuple)):
            if len(value) != n_layer:
                raise ModelFormatError(
                    f"GGUF metadata {self.arch}.{key} has {len(value)} entries for {n_layer} layers"
                )
            return tuple(self._integer(key, v, 1, _MAX_HEADS) for v in value)
        return (self._integer(key, value, 1, _MAX_HEADS),) * n_layer

    def number(
        self, key: str, default: Any = None, *, low: float = -math.inf, positive: bool = False
    ) -> float:
        value = self.get(key, default)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ModelFormatError(
                f"GGUF metadata {self.arch}.{key} is {_shown(value)}, not a number"
            ) from None
        if not math.isfinite(number) or number < low or (positive and number <= 0):
            raise ModelFormatError(f"GGUF metadata {self.arch}.{key} = {number} is out of range")
        return number

    def _integer(self, key: str, value: Any, low: int, high: int) -> int:
        try:
            number = int(value)
            whole = number == value
        except (TypeError, ValueError, OverflowError):
            whole = False
        if not whole:
            raise ModelFormatError(
                f"GGUF metadata {self.arch}.{key} is {_shown(value)}, not an integer"
            )
        if not low <= number <= high:
            raise ModelFormatError(
                f"GGUF metadata {self.arch}.{key} = {number}: it must be from {low} to {high}"
            )
        return number


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _softcap(read: _Reader, key: str, default: float | None) -> float:
    return 0.0 if default is None else read.number(key, default, low=0.0)


def _scale(read: _Reader, key: str | None) -> float:
    """A multiplier the family reads from `key`: 1 when it has none, or the file lacks it or
    holds 0 (llama.cpp skips a multiplier of 0)."""
    return 1.0 if key is None else read.number(key, 1.0) or 1.0
