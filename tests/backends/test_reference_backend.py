"""The reference backend (float64) agrees with llama.cpp on every model family we have data for.

Synthetic models (tests/data/synth): through the CPU backend (test_engine_forward.py).
Gemma 3 270M: teacher-forced along llama.cpp's greedy outputs, log-probabilities of its top-1
token within 0.5 nats at every step and 0.08 on average (llama.cpp quantizes activations to
8 bits for its matmuls and rounds GELU's input to fp16; the reference does neither).
RoPE scaling (linear, Llama 3 rope_freqs, YaRN): angles against the formulas as published.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay import gguf
from llamay.backends.reference import rope
from llamay.models.hparams import from_metadata
from llamay.models.spec import Rope, layer_rope, rope_configs

from helpers.llama_cpp import assert_teacher_forced_agreement

DATA = Path(__file__).parent.parent / "data"


# ----------------------------------------------------------------------------------------------
# RoPE scaling


def write_rope_model(path: Path, arch: str, head_dim: int, metadata=None, tensors=None) -> Path:
    """A GGUF with an architecture's hyperparameters: enough for its RoPE configurations."""
    meta = {
        "general.architecture": arch,
        f"{arch}.context_length": 8192,
        f"{arch}.embedding_length": 2 * head_dim,
        f"{arch}.block_count": 6,
        f"{arch}.feed_forward_length": 4 * head_dim,
        f"{arch}.attention.head_count": 2,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        **(metadata or {}),
    }
    return gguf.write(path, meta, tensors or {})


POSITIONS = np.array([0, 1, 7, 100, 1000, 5000, 20000])


def layer_ropes(path: Path, n_ctx: int | None = None) -> list[Rope]:
    """Each layer's RoPE configuration, as the spec builder gives it to the backends."""
    gg = gguf.read(path)
    hp = from_metadata(gg.metadata)
    ropes = rope_configs(gg, hp, hp.n_ctx_train if n_ctx is None else n_ctx)
    return [ropes[layer_rope(hp, il, len(ropes))] for il in range(hp.n_layer)]


def base_inv_freq(base: float, dim: int) -> np.ndarray:
    return 1.0 / base ** (np.arange(0, dim, 2) / dim)


def test_rope_linear_scaling(tmp_path):
    meta = {
        "llama.rope.freq_base": 10000.0,
        "llama.rope.scaling.type": "linear",
        "llama.rope.scaling.factor": 4.0,
    }
    path = write_rope_model(tmp_path / "m.gguf", "llama", 64, meta)
    theta, mscale = rope.angles(layer_ropes(path)[0], POSITIONS)
    expected = np.outer(POSITIONS, base_inv_freq(10000.0, 64) / 4.0)
    np.testing.assert_allclose(theta, expected, rtol=1e-13, atol=0)
    assert mscale == 1.0


def llama3_inv_freq(base, dim, factor, low_freq_factor, high_freq_factor, old_context):
    """Llama 3.1's frequencies as Meta publishes them (transformers' _compute_llama3_parameters)."""
    inv_freq = base_inv_freq(base, dim)
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = old_context / low_freq_factor
    high_freq_wavelen = old_context / high_freq_factor
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(medium, smoothed, scaled)


def test_rope_llama3_frequency_factors(tmp_path):
    """convert_hf_to_gguf.py stores Llama 3.1's scaling as rope_freqs = base / scaled frequency;
    ggml divides each angle by it."""
    base, dim = 500000.0, 64
    target = llama3_inv_freq(base, dim, 8.0, 1.0, 4.0, 8192)
    factors = (base_inv_freq(base, dim) / target).astype(np.float32)
    assert factors.min() == 1.0 and factors.max() == 8.0 and len(set(factors)) > 3  # 3 regimes
    path = write_rope_model(
        tmp_path / "m.gguf",
        "llama",
        dim,
        {"llama.rope.freq_base": base},
        {"rope_freqs.weight": factors},
    )
    theta, mscale = rope.angles(layer_ropes(path)[0], POSITIONS)
    # The file holds the factors in float32: compare at that precision.
    np.testing.assert_allclose(theta, np.outer(POSITIONS, target), rtol=1e-7)
    assert mscale == 1.0


def yarn_inv_freq(base, dim, factor, beta_fast, beta_slow, original_context):
    """YaRN (Peng et al. 2023) as transformers' _compute_yarn_parameters computes it."""

    def correction_dim(n_rotations):
        return dim * math.log(original_context / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    extrap, interp = base_inv_freq(base, dim), base_inv_freq(base, dim) / factor
    return interp * (1 - extrapolation) + extrap * extrapolation, 0.1 * math.log(factor) + 1


def test_rope_yarn(tmp_path):
    meta = {
        "qwen3.rope.freq_base": 10000.0,
        "qwen3.rope.scaling.type": "yarn",
        "qwen3.rope.scaling.factor": 4.0,
        "qwen3.rope.scaling.original_context_length": 4096,
    }
    path = write_rope_model(tmp_path / "m.gguf", "qwen3", 64, meta)
    theta, mscale = rope.angles(layer_ropes(path)[0], POSITIONS)
    inv_freq, attention_factor = yarn_inv_freq(10000.0, 64, 4.0, 32, 1, 4096)
    extrapolated = inv_freq == base_inv_freq(10000.0, 64)
    assert 0 < extrapolated.sum() < len(inv_freq) - 1  # the ramp sits inside the dimensions
    np.testing.assert_allclose(theta, np.outer(POSITIONS, inv_freq), rtol=1e-12)
    assert mscale == pytest.approx(attention_factor, rel=1e-12)


def test_rope_phi3_longrope_factors(tmp_path):
    """Phi-3 LongRoPE: frequencies divided by rope_factors_long when the context exceeds the
    original one, rope_factors_short otherwise (llama_model::get_rope_factors); cos and sin
    scaled by the file's rope.scaling.attn_factor."""
    dim = 64
    long = np.linspace(1.0, 40.0, dim // 2).astype(np.float32)
    short = np.linspace(1.0, 1.5, dim // 2).astype(np.float32)
    attn_factor = math.sqrt(1 + math.log(32) / math.log(4096))
    meta = {
        "phi3.context_length": 131072,
        "phi3.rope.scaling.original_context_length": 4096,
        "phi3.rope.scaling.attn_factor": attn_factor,
    }
    factors = {"rope_factors_long.weight": long, "rope_factors_short.weight": short}
    path = write_rope_model(tmp_path / "m.gguf", "phi3", dim, meta, factors)
    for n_ctx, chosen in [(4096, short), (4097, long), (None, long)]:
        theta, mscale = rope.angles(layer_ropes(path, n_ctx)[0], POSITIONS)
        expected = np.outer(POSITIONS, base_inv_freq(10000.0, dim) / chosen.astype(np.float64))
        np.testing.assert_allclose(theta, expected, rtol=1e-13)
        assert mscale == pytest.approx(attn_factor, rel=1e-7)  # stored as float32


@pytest.mark.parametrize("neox", [False, True])
def test_rope_rotates_the_right_pairs(neox):
    """Normal RoPE turns (x[2i], x[2i+1]), NeoX turns (x[i], x[i + n_rot/2]); both by theta_i,
    as a complex multiplication; dimensions past n_rot stay."""
    r = Rope(32, neox, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0, 4096, None)
    x = np.random.default_rng(0).standard_normal((len(POSITIONS), 3, 40))
    out = rope.apply(x, r, POSITIONS)
    theta, _ = rope.angles(r, POSITIONS)
    if neox:
        first, second = np.arange(16), np.arange(16, 32)
    else:
        first, second = np.arange(0, 32, 2), np.arange(1, 32, 2)
    turned = (x[..., first] + 1j * x[..., second]) * np.exp(1j * theta)[:, None, :]
    np.testing.assert_allclose(out[..., first], turned.real, atol=1e-12)
    np.testing.assert_allclose(out[..., second], turned.imag, atol=1e-12)
    np.testing.assert_array_equal(out[..., 32:], x[..., 32:])


# ----------------------------------------------------------------------------------------------
# Per-family hyperparameters


def test_gemma3_alternates_five_local_layers_with_one_global(tmp_path):
    meta = {
        "gemma3.rope.freq_base": 1e6,
        "gemma3.attention.sliding_window": 512,
        "gemma3.rope.scaling.type": "linear",
        "gemma3.rope.scaling.factor": 8.0,
    }
    path = write_rope_model(tmp_path / "m.gguf", "gemma3", 256, meta)
    hparams = from_metadata(gguf.read(path).metadata)
    ropes = layer_ropes(path)
    assert hparams.swa_layers == (True,) * 5 + (False,)
    assert hparams.sliding_window == 512
    # Local layers: base 10000, unscaled; the global layer: the file's base and scaling.
    assert [(r.freq_base, r.freq_scale) for r in ropes] == [(10000.0, 1.0)] * 5 + [(1e6, 0.125)]
    assert all(r.neox for r in ropes)
    assert hparams.attn_scale == 1 / 16  # 1/sqrt(head_dim); only the 27B differs


def test_gemma2_synth_hyperparameters():
    hp = from_metadata(gguf.read(DATA / "synth" / "gemma2-Q8_0.gguf").metadata)
    assert hp.swa_layers == (True, False, True, False)
    assert hp.sliding_window == 128
    assert (hp.attn_softcap, hp.final_softcap) == (20.0, 15.0)
    assert hp.family.embedding_sqrt_scale and hp.family.post_norms


def test_mistral_window_is_ignored_for_the_llama_architecture(tmp_path):
    """llama.cpp reads no sliding window for arch llama: every layer attends to everything."""
    path = write_rope_model(tmp_path / "m.gguf", "llama", 64, {"llama.attention.sliding_window": 4})
    assert from_metadata(gguf.read(path).metadata).sliding_window == 0


# Synthetic models of every family against llama.cpp's perplexity: the CPU backend over the
# whole text, and the reference against the CPU backend over its first chunks
# (tests/backends/test_engine_forward.py), so the reference's float64 pass over every token of
# the text (minutes) is not repeated here.


def all_logits(model: llamay.engine.Model):
    """ids -> the logits after each of them, in a new context."""

    def logits(ids: list[int]) -> np.ndarray:
        with model.context() as ctx:
            return ctx.feed(ids, all_logits=True)

    return logits


# ----------------------------------------------------------------------------------------------
# Gemma 3 270M against llama.cpp, teacher-forced


def test_gemma3_270m_matches_llama_cpp_teacher_forced(gemma_path):
    model = llamay.load(gemma_path, backend="reference", n_ctx=2048)
    cases = json.loads((DATA / "gemma3-270m-q4_k_m.json").read_text())["greedy"]
    differences = assert_teacher_forced_agreement(cases, all_logits(model))
    assert len(differences) == 192
