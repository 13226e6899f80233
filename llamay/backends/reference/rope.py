"""Rotary position embeddings exactly as ggml_rope_ext computes them, in float64.

ggml-cpu/ops.cpp builds, for each position p and each rotated pair i (0 <= i < n_rot/2):

    theta_extrap = p * base**(-2i/n_rot) / freq_factors[i]      (factors: 1 when absent)
    theta_interp = freq_scale * theta_extrap
    theta        = theta_interp                                   (no YaRN: ext_factor == 0)
                 = mix(theta_interp, theta_extrap, ramp(i) * ext_factor)   (YaRN)
    cos, sin     = cos(theta) * mscale, sin(theta) * mscale

then rotates (x[2i], x[2i+1]) for RoPE "normal" (Llama) or (x[i], x[i + n_rot/2]) for NeoX
(GPT-NeoX, Qwen, Phi-3, Gemma). Dimensions past n_rot pass through unchanged. A `Rope` is
one layer's ggml_rope_ext arguments, as the spec builder (models/spec.py) gives them.
"""

from __future__ import annotations

import math

import numpy as np

from llamay.models.spec import Rope


def yarn_corr_dims(rope: Rope) -> tuple[float, float]:
    """The pair indices where YaRN's ramp from extrapolation to interpolation starts and ends.

    ggml_rope_yarn_corr_dims: the dimension whose wavelength fits `beta` times into the
    original context, floored (fast) and ceiled (slow), clamped to [0, n_rot - 1].
    """

    def corr_dim(n_rotations: float) -> float:
        return (
            rope.n_rot
            * math.log(rope.n_ctx_orig / (n_rotations * 2 * math.pi))
            / (2 * math.log(rope.freq_base))
        )

    start = math.floor(corr_dim(rope.beta_fast))
    end = math.ceil(corr_dim(rope.beta_slow))
    return max(0.0, start), min(rope.n_rot - 1.0, end)


def angles(rope: Rope, positions: np.ndarray) -> tuple[np.ndarray, float]:
    """Rotation angles (n_positions, n_rot/2) and the cos/sin magnitude, as ggml computes them."""
    pair = np.arange(rope.n_rot // 2, dtype=np.float64)
    inv_freq = rope.freq_base ** (-2.0 * pair / rope.n_rot)
    theta_extrap = np.outer(positions.astype(np.float64), inv_freq)
    if rope.freq_factors is not None:
        theta_extrap = theta_extrap / rope.freq_factors
    theta_interp = rope.freq_scale * theta_extrap
    mscale = rope.attn_factor
    if rope.ext_factor == 0.0:
        return theta_interp, mscale
    low, high = yarn_corr_dims(rope)
    # rope_yarn_ramp: 1 below `low` (keep extrapolated), 0 above `high` (interpolate); ggml
    # indexes it by i0/2 where i0 = 2*pair, i.e. by the pair index itself.
    ramp = 1.0 - np.clip((pair - low) / max(0.001, high - low), 0.0, 1.0)
    mix = ramp * rope.ext_factor
    theta = theta_interp * (1.0 - mix) + theta_extrap * mix
    # rope_yarn: YaRN's attention temperature, folded into the magnitude of cos and sin.
    mscale *= 1.0 + 0.1 * math.log(1.0 / rope.freq_scale)
    return theta, mscale


def apply(x: np.ndarray, rope: Rope, positions: np.ndarray) -> np.ndarray:
    """Rotate x (n_tokens, n_heads, head_dim) by each token's position."""
    theta, mscale = angles(rope, positions)
    cos = (np.cos(theta) * mscale)[:, None, :]
    sin = (np.sin(theta) * mscale)[:, None, :]
    half = rope.n_rot // 2
    out = x.copy()
    if rope.neox:
        first, second = x[..., :half], x[..., half : rope.n_rot]
        out[..., :half] = first * cos - second * sin
        out[..., half : rope.n_rot] = first * sin + second * cos
    else:
        even, odd = x[..., 0 : rope.n_rot : 2], x[..., 1 : rope.n_rot : 2]
        out[..., 0 : rope.n_rot : 2] = even * cos - odd * sin
        out[..., 1 : rope.n_rot : 2] = even * sin + odd * cos
    return out
