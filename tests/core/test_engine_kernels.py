"""The forward step's kernels besides matmul: every kernel set gives the reference's bits, and the
reference computes what it should (against float64 numpy, to fp32 accuracy)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf import quants as gguf_quants

from llamay._core import kernels as E
from llamay._core.pages import PageMemory
from llamay.backends.reference import rope as reference_rope
from llamay.models.spec import Rope

SIMD_SETS = [k for k in E.kernel_sets() if k != "reference"]
RNG = np.random.default_rng(7)


def values(n: int, scale: float = 3.0) -> np.ndarray:
    return (RNG.standard_normal(n) * scale).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Every kernel set computes the reference's bits


@pytest.mark.parametrize("kernels", SIMD_SETS)
@pytest.mark.parametrize("n", [1, 15, 16, 17, 640, 1001])
def test_elementwise_kernels_match_the_reference_bit_for_bit(kernels, n):
    x, w, up = values(n), values(n, 1.0), values(n, 1.0)
    wide = np.concatenate([values(n, 30.0), [0.0, -0.0, 88.5, -88.5, 1e-30]]).astype(np.float32)
    for args in [(x, w, 1e-6), (x, None, 1e-5)]:
        assert np.array_equal(E.rms_norm(*args, kernels), E.rms_norm(*args, "reference"))
        assert np.array_equal(E.layer_norm(*args, kernels), E.layer_norm(*args, "reference"))
    for act in ("silu", "gelu_tanh", "swiglu_oai"):
        assert np.array_equal(
            E.gated(act, wide, np.ones_like(wide), kernels),
            E.gated(act, wide, np.ones_like(wide), "reference"),
        )
        assert np.array_equal(E.gated(act, x, up, kernels), E.gated(act, x, up, "reference"))
    assert np.array_equal(E.softcap(wide, 15.0, kernels), E.softcap(wide, 15.0, "reference"))
    assert E.logsumexp(x, kernels) == E.logsumexp(x, "reference")


def kv_arena(
    dtype: str, page_tokens: int, head_dim: int = 32, n_kv_heads: int = 2, n_pages: int = 8
) -> PageMemory:
    return PageMemory(2, n_kv_heads, head_dim, page_tokens, dtype, n_pages)


def fill(arena: PageMemory, pages: np.ndarray) -> None:
    """Random K and V in every layer and head of the pages (Q8_0: ggml's quantization of them)."""
    for page in pages:
        for layer in range(arena.n_layers):
            for view in (arena.k_view(page, layer), arena.v_view(page, layer)):
                if arena.dtype == "Q8_0":
                    x = RNG.standard_normal((*view.shape[:2], arena.head_dim)).astype(np.float32)
                    view[...] = gguf_quants.quantize(x, GGMLQuantizationType.Q8_0)
                else:
                    dtype = np.float16 if arena.dtype == "F16" else np.float32
                    view[...] = RNG.standard_normal(view.shape).astype(dtype)


def kv_values(view: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 values a K or V view holds."""
    if dtype == "Q8_0":
        view = gguf_quants.dequantize(view, GGMLQuantizationType.Q8_0)
    return view.astype(np.float64)


@pytest.mark.parametrize("dtype", ["F16", "F32", "Q8_0"])
@pytest.mark.parametrize("kernels", SIMD_SETS)
# head_dim 96 leaves a part-filled group of four chunks; pages of 16, 32 and 64 positions
@pytest.mark.parametrize("head_dim, page_tokens", [(32, 16), (96, 64), (128, 32), (256, 16)])
def test_attention_matches_the_reference_bit_for_bit(dtype, kernels, head_dim, page_tokens):
    arena = kv_arena(dtype, page_tokens, head_dim)
    pages = np.arange(8, dtype=np.int32)
    fill(arena, pages)
    last = 8 * page_tokens - 1
    for n_q, pos, window, softcap in [
        (1, 0, 0, 0.0),
        (4, 37, 0, 0.0),
        (10, 63, 20, 0.0),
        (3, 50, 0, 30.0),
        (2, 17, 5, 50.0),
        (8, last, 0, 0.0),
        (7, last - 3, 3 * page_tokens + 5, 0.0),
        (5, last - 20, 0, 0.0),
        (6, 40, 0, 20.0),
    ]:
        q = (RNG.standard_normal((n_q, head_dim)) * 2).astype(np.float32)
        args = (arena, pages, 1, 1, q, pos, window, 0.3, softcap)
        assert np.array_equal(E.attention(*args, kernels), E.attention(*args, "reference"))
        sinks = values(n_q, 2.0)
        assert np.array_equal(
            E.attention(*args, kernels, sinks=sinks), E.attention(*args, "reference", sinks=sinks)
        )


@pytest.mark.parametrize("dtype", ["F16", "F32", "Q8_0"])
# spans of 16 tiles of 16, 5 tiles of 48 (240 positions) and 4 tiles of 64
@pytest.mark.parametrize("head_dim, page_tokens", [(64, 16), (128, 48), (256, 64)])
def test_spans_computed_apart_and_merged_give_the_same_bits(dtype, head_dim, page_tokens):
    """Past one span (256 positions), a step split by spans computes each span's state on its
    own and attention_merge folds them: the bits of one pass over every span, in every kernel
    set, with windows that start inside a span, sinks, soft-caps and groups wider than eight."""
    n_pages = 1300 // page_tokens + 1
    arena = kv_arena(dtype, page_tokens, head_dim, n_pages=n_pages)
    pages = RNG.permutation(n_pages).astype(np.int32)
    fill(arena, pages)
    last = n_pages * page_tokens - 1
    for n_q, pos, window, softcap in [
        (4, last, 0, 0.0),
        (10, 700, 0, 0.0),
        (3, 1100, 600, 30.0),
        (8, 530, 40, 0.0),
        (1, 511, 0, 0.0),
        (6, 1024, 1000, 0.0),
    ]:
        q = (RNG.standard_normal((n_q, head_dim)) * 2).astype(np.float32)
        args = (arena, pages, 1, 0, q, pos, window, 0.3, softcap)
        for sinks in (None, values(n_q, 2.0)):
            expected = E.attention(*args, "reference", sinks=sinks)
            for kernels in E.kernel_sets():
                got = E.attention(*args, kernels, sinks=sinks)
                apart = E.attention(*args, kernels, sinks=sinks, by_spans=True)
                assert np.array_equal(got, expected), (kernels, pos)
                assert np.array_equal(apart, expected), (kernels, pos)


# Every kernel set's attention over the arena saved in argv[1] (F16 pages of 64 positions, one
# query group of four heads at the last position: every page asks for the next), saved to argv[2]
ATTENTION_IN_A_FRESH_PROCESS = """
import sys
import numpy as np
from llamay._core import kernels as E
from llamay._core.pages import PageMemory
given = np.load(sys.argv[1])
arena = PageMemory(2, 2, 64, 64, "F16", 8)
for page in range(8):
    for layer in range(2):
        arena.k_view(page, layer)[...] = given["k"][page, layer]
        arena.v_view(page, layer)[...] = given["v"][page, layer]
pages, q = np.arange(8, dtype=np.int32), given["q"]
got = [E.attention(arena, pages, 1, 1, q, 8 * 64 - 1, 0, 0.3, 0.0, k) for k in E.kernel_sets()]
np.savez(sys.argv[2], *got)
"""


@pytest.mark.parametrize("mode", ["l1", "l2"])
def test_where_the_next_page_is_prefetched_changes_no_result(mode, tmp_path):
    # LLAMAY_PREFETCH (csrc/prefetch.h) is read as the library loads: l1 asks for the next KV
    # page into L1 as well as L2, l2 into L2 alone (the L1 requests go to idle lines). Each mode
    # runs in a process of its own, every kernel set against this process's reference.
    arena = kv_arena("F16", 64, 64)
    fill(arena, np.arange(8, dtype=np.int32))
    k = np.stack([[arena.k_view(p, layer) for layer in range(2)] for p in range(8)])
    v = np.stack([[arena.v_view(p, layer) for layer in range(2)] for p in range(8)])
    q = (RNG.standard_normal((4, 64)) * 2).astype(np.float32)
    given, saved = tmp_path / "given.npz", tmp_path / "attention.npz"
    np.savez(given, k=k, v=v, q=q)
    subprocess.run(
        [sys.executable, "-c", ATTENTION_IN_A_FRESH_PROCESS, str(given), str(saved)],
        env={**os.environ, "LLAMAY_PREFETCH": mode},
        cwd=tmp_path,  # the installed llamay, not a source tree's under the working directory
        check=True,
    )
    expected = E.attention(
        arena, np.arange(8, dtype=np.int32), 1, 1, q, 8 * 64 - 1, 0, 0.3, 0.0, "reference"
    )
    got = np.load(saved)
    assert len(got.files) == len(E.kernel_sets())
    for name in got.files:
        assert np.array_equal(got[name], expected), name


# ----------------------------------------------------------------------------------------------
# The reference computes the right thing


def test_rms_norm_is_ggml_rms_norm_times_the_weight():
    x, w = values(640), values(640, 1.0)
    expected = x / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-6) * w
    np.testing.assert_allclose(E.rms_norm(x, w, 1e-6, "reference"), expected, rtol=2e-6)


def test_layer_norm_is_ggml_norm_times_the_weight():
    """Cohere's LayerNorm: centred, divided by the root of the variance plus eps; the tail of a
    row that is not a multiple of 16 counts for nothing."""
    for n in (640, 1001, 5):
        x, w = values(n) + 4.0, values(n, 1.0)
        c = x.astype(np.float64) - x.astype(np.float64).mean()
        expected = c / np.sqrt(np.mean(c**2) + 1e-5) * w
        # x - mean in fp32: an absolute error of an ulp of x
        np.testing.assert_allclose(
            E.layer_norm(x, w, 1e-5, "reference"), expected, rtol=1e-5, atol=3e-6
        )
        in_place = E.layer_norm(x, None, 1e-5, "reference")
        np.testing.assert_allclose(
            in_place, c / np.sqrt(np.mean(c**2) + 1e-5), rtol=1e-5, atol=3e-6
        )


def test_swiglu_oai_is_gpt_oss_clamped_swiglu():
    """ggml_swiglu_oai with llama.cpp's alpha 1.702 and limit 7: the gate clamped above at 7,
    the up projection to [-7, 7], gate * sigmoid(1.702 gate) * (up + 1)."""
    gate = np.array([-20, -3, -0.5, 0, 0.5, 3, 6.9, 7, 7.1, 30], np.float32)
    up = np.array([-30, -7.5, -7, -1, 0, 1, 6.9, 7, 8, 30], np.float32)
    g, u = np.minimum(gate.astype(np.float64), 7), np.clip(up.astype(np.float64), -7, 7)
    expected = g / (1 + np.exp(-1.702 * g)) * (u + 1)
    np.testing.assert_allclose(E.gated("swiglu_oai", gate, up, "reference"), expected, rtol=2e-6)
    # the clamps matter: above 7 the result no longer moves
    assert (
        E.gated("swiglu_oai", gate, up, "reference")[-1]
        == E.gated("swiglu_oai", np.float32([7.0]), np.float32([7.0]), "reference")[0]
    )


def test_attention_sinks_join_the_denominator():
    """A sink is one more score per head, with no value: softmax over [scores, sink], the sink's
    share dropped (ggml_soft_max_add_sinks)."""
    arena = kv_arena("F32", 16, n_pages=40)
    pages = np.arange(40, dtype=np.int32)
    fill(arena, pages)
    k = np.concatenate([arena.k_view(p, 1)[1] for p in pages]).astype(np.float64)
    v = np.concatenate([arena.v_view(p, 1)[1] for p in pages]).astype(np.float64)
    # the sink joins once, in the first span a window leaves visible
    for pos, window in [(0, 0), (40, 0), (63, 7), (600, 0), (639, 300)]:
        q = (RNG.standard_normal((3, 32)) * 2).astype(np.float32)
        sinks = np.array([-1.0, 0.5, 8.0], np.float32)  # the last one takes most of the mass
        first = max(0, pos - window + 1) if window else 0
        scores = q.astype(np.float64) @ k[first : pos + 1].T * 0.3
        full = np.concatenate([scores, sinks[:, None].astype(np.float64)], axis=1)
        p = np.exp(full - full.max(axis=1, keepdims=True))
        p = p[:, :-1] / p.sum(axis=1, keepdims=True)
        got = E.attention(arena, pages, 1, 1, q, pos, window, 0.3, 0.0, "reference", sinks=sinks)
        np.testing.assert_allclose(got, p @ v[first : pos + 1], rtol=1e-5, atol=2e-6)


def test_activations_are_accurate_to_a_few_ulp():
    """Our own exp and tanh (vec16.h) stand in for libm's; they must be as good as fp32 allows."""
    x = np.concatenate([np.linspace(-20, 20, 4001), [-87.0, -60.0, 60.0, 80.0]]).astype(np.float32)
    x64 = x.astype(np.float64)
    silu = x64 / (1 + np.exp(-x64))
    gelu = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * x64 * (1 + 0.044715 * x64**2)))
    one = np.ones_like(x)
    np.testing.assert_allclose(E.gated("silu", x, one, "reference"), silu, rtol=4e-7, atol=1e-37)
    np.testing.assert_allclose(
        E.gated("gelu_tanh", x, one, "reference"), gelu, rtol=2e-6, atol=1e-7
    )
    cap = 30.0
    np.testing.assert_allclose(
        E.softcap(x * 5, cap, "reference"), cap * np.tanh(x64 * 5 / cap), rtol=4e-7, atol=1e-6
    )


def test_logsumexp_and_token_logprobs():
    logits = np.stack([values(1000, 5.0), values(1000, 20.0)])
    mx, total = E.logsumexp(logits[1], "reference")
    assert mx == logits[1].max()
    assert total == pytest.approx(np.exp(logits[1].astype(np.float64) - mx).sum(), rel=1e-6)
    targets = np.array([3, 999], dtype=np.int32)
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(
        E.token_logprobs(logits, targets), expected[[0, 1], targets], rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("dtype", ["F16", "F32", "Q8_0"])
def test_attention_is_softmax_attention_over_the_visible_positions(dtype):
    """Positions pos - window + 1 .. pos (or 0 .. pos), scores q.k * scale soft-capped, fp32."""
    arena = kv_arena(dtype, 16, n_pages=72)
    pages = np.arange(72, dtype=np.int32)
    fill(arena, pages)
    k = np.concatenate([kv_values(arena.k_view(p, 1)[1], dtype) for p in pages])
    v = np.concatenate([kv_values(arena.v_view(p, 1)[1], dtype) for p in pages])
    # past 256 and 1,024 positions: spans of their own softmax, folded
    for pos, window, softcap in [
        (0, 0, 0.0),
        (40, 0, 0.0),
        (63, 7, 0.0),
        (33, 0, 20.0),
        (1100, 0, 0.0),
        (1151, 700, 20.0),
    ]:
        q = (RNG.standard_normal((3, 32)) * 2).astype(np.float32)
        first = max(0, pos - window + 1) if window else 0
        scores = q.astype(np.float64) @ k[first : pos + 1].T * 0.3
        if softcap:
            scores = softcap * np.tanh(scores / softcap)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        expected = (p / p.sum(axis=1, keepdims=True)) @ v[first : pos + 1]
        got = E.attention(arena, pages, 1, 1, q, pos, window, 0.3, softcap, "reference")
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6)


def rope(**changes) -> Rope:
    base = dict(
        n_rot=64,
        neox=False,
        freq_base=10000.0,
        freq_scale=1.0,
        ext_factor=0.0,
        attn_factor=1.0,
        beta_fast=32.0,
        beta_slow=1.0,
        n_ctx_orig=4096,
        freq_factors=None,
    )
    return Rope(**{**base, **changes})


@pytest.mark.parametrize(
    "config",
    [
        rope(),
        rope(freq_base=1e6, freq_scale=0.25),
        rope(freq_base=5e5, freq_factors=np.linspace(1, 8, 32, dtype=np.float32)),
        rope(freq_scale=0.25, ext_factor=1.0, n_ctx_orig=1024, attn_factor=0.9),
    ],
    ids=["plain", "linear", "factors", "yarn"],
)
def test_rope_angles_match_the_reference(config):
    """cos and sin of every pair, computed in double with our own functions, equal the float64
    reference's rounded to fp32 (at most one rounding apart)."""
    positions = np.array([0, 1, 7, 100, 4095, 30000, 131071], dtype=np.int32)
    theta, mscale = reference_rope.angles(config, positions)
    got = E.rope_cos_sin(config, positions)
    np.testing.assert_allclose(got[:, 0::2], np.cos(theta) * mscale, rtol=0, atol=3e-7 * mscale)
    np.testing.assert_allclose(got[:, 1::2], np.sin(theta) * mscale, rtol=0, atol=3e-7 * mscale)
