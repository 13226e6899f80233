"""Quantized matmul: accuracy against float64, and the determinism contract.

Every output must be close to dequantize(W) @ x in float64, within a bound derived from the
activation quantization error; and bit-identical across kernel sets (SIMD vs the scalar
reference), batch sizes (one token vs many), row slices and thread counts.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGMLQuantizationType, quants

from llamay._core import matmul as mm
from llamay.errors import UnsupportedCPU, UnsupportedModel
from llamay.gguf.types import by_name

FP16 = np.float16

# Byte offset of every fp16 scale in a block, set to sane values in random weights.
HALF_SCALES = {
    "Q4_0": [0],
    "Q4_1": [0, 2],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q8_0": [0],
    "IQ4_NL": [0],
    "Q1_0": [0],
    "Q2_K": [80, 82],
    "Q3_K": [108],
    "Q4_K": [0, 2],
    "Q5_K": [0, 2],
    "Q6_K": [208],
    "IQ2_XXS": [0],
    "IQ2_XS": [0],
    "IQ2_S": [0],
    "IQ3_XXS": [0],
    "IQ3_S": [0],
    "IQ4_XS": [0],
    "TQ1_0": [52],
    "TQ2_0": [64],
}
# One-byte exponent scales: MXFP4's E8M0 and NVFP4's four UE4M3.
BYTE_SCALES = {"MXFP4": ([0], (119, 125)), "NVFP4": ([0, 1, 2, 3], (0x20, 0x38))}

FLOAT_TYPES = ["F32", "F16", "BF16"]
Q8_0_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4"]
Q8_K_TYPES = [
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ2_S",
    "IQ3_XXS",
    "IQ3_S",
    "IQ4_XS",
    "TQ1_0",
    "TQ2_0",
]
DEQUANTIZED_TYPES = ["NVFP4", "Q1_0"]
ALL_TYPES = FLOAT_TYPES + Q8_0_TYPES + Q8_K_TYPES + DEQUANTIZED_TYPES

# Column counts per type: a single block, a tail that leaves lanes unused, and several rounds
# of the eight lanes (640 is Gemma 3 270M's n_embd). For the packed formats: rows whose last
# group holds 1, 7 and 4 blocks.
COLUMNS = {
    **{t: [17, 640] for t in FLOAT_TYPES},
    **{t: [32, 224, 288, 640] for t in Q8_0_TYPES},
    **{t: [256, 2304] for t in Q8_K_TYPES},
    "NVFP4": [64, 640],
    "Q1_0": [128, 640],
}
SIMD_SETS = [s for s in mm.kernel_sets() if s != "reference"]


def random_weights(name: str, n_rows: int, n_cols: int, rng: np.random.Generator) -> np.ndarray:
    """The bytes of a random n_rows x n_cols matrix of type `name`, with sane scales."""
    if name in FLOAT_TYPES:
        w = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
        if name == "F16":
            w = w.astype(FP16)
        elif name == "BF16":
            w = (w.view(np.uint32) >> 16).astype(np.uint16)
        return w.view(np.uint8).reshape(-1)
    t = by_name(name)
    n_blocks = n_rows * n_cols // t.block_elems
    blocks = rng.integers(0, 256, (n_blocks, t.block_bytes), dtype=np.uint8)
    for offset in HALF_SCALES.get(name, []):
        scale = rng.uniform(0.001, 0.01, n_blocks) * rng.choice([-1, 1], n_blocks)
        blocks[:, offset : offset + 2] = scale.astype(FP16).view(np.uint8).reshape(-1, 2)
    if name in ("Q2_K", "Q4_K", "Q5_K"):  # dmin is positive in ggml's quantizers
        dmin = HALF_SCALES[name][1]
        blocks[:, dmin + 1] &= 0x7F
    if name in BYTE_SCALES:
        offsets, (low, high) = BYTE_SCALES[name]
        for offset in offsets:
            blocks[:, offset] = rng.integers(low, high, n_blocks)
    return blocks.reshape(-1)


def dequantize(name: str, w: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """float64 weights, by gguf-py (ggml's reference), or by hand for Q1_0 which it lacks."""
    if name == "Q1_0":
        blocks = w.reshape(-1, 18)
        d = blocks[:, :2].copy().view(FP16).astype(np.float64)
        bits = np.unpackbits(blocks[:, 2:], axis=1, bitorder="little")
        return (d * (2.0 * bits - 1)).reshape(n_rows, n_cols)
    qtype = GGMLQuantizationType[name]
    flat = quants.dequantize(w, qtype) if name != "F32" else w.view(np.float32)
    return np.asarray(flat, dtype=np.float64).reshape(n_rows, n_cols)


def activation_error(name: str, x: np.ndarray) -> np.ndarray:
    """A bound on |x_i - the activation the kernel multiplies|, per element of x."""
    if name in Q8_0_TYPES:
        blocks = x.astype(np.float64).reshape(len(x), -1, 32)
        d = np.abs(blocks).max(axis=2, keepdims=True) / 127
        d16 = d.astype(FP16).astype(np.float64)
        # round to nearest (half a step) with the exact step, rescaled by the fp16 step
        error = 0.5 * d * (1 + 1e-4) + 127 * np.abs(d16 - d)
        return np.broadcast_to(error, blocks.shape).reshape(x.shape)
    if name in Q8_K_TYPES:
        blocks = x.astype(np.float64).reshape(len(x), -1, 256)
        error = 0.5 * np.abs(blocks).max(axis=2, keepdims=True) / 127 * (1 + 1e-4)
        return np.broadcast_to(error, blocks.shape).reshape(x.shape)
    return np.zeros_like(x, dtype=np.float64)


def quantized_activations(name: str, x: np.ndarray) -> np.ndarray:
    """The activations the kernel multiplies, as float64: x itself for fp32 kernels, else x
    through ggml's Q8_0 quantizer (gguf-py's port) or its Q8_K quantizer (emulated here)."""
    if name in Q8_0_TYPES:
        q8_0 = quants.quantize(x, GGMLQuantizationType.Q8_0)
        return quants.dequantize(q8_0, GGMLQuantizationType.Q8_0).astype(np.float64)
    if name in Q8_K_TYPES:
        blocks = x.reshape(len(x), -1, 256)
        index = np.abs(blocks).argmax(axis=2)[..., None]
        peak = np.take_along_axis(blocks, index, axis=2)  # the first of largest magnitude
        with np.errstate(divide="ignore"):
            iscale = np.where(peak == 0, 0, np.float32(-127) / peak).astype(np.float32)
            d = np.where(peak == 0, 0, np.float32(1) / iscale).astype(np.float32)
        q = np.minimum(np.rint(iscale * blocks), 127)  # ggml's nearest_int: ties to even
        return (q.astype(np.float64) * d).reshape(x.shape)
    return x.astype(np.float64)


def assert_accurate(name: str, got: np.ndarray, w: np.ndarray, x: np.ndarray) -> None:
    """got is w @ x up to the activations' quantization (loose), and w @ the quantized
    activations up to fp32 rounding (tight: catches any slip in the integer dot products)."""
    got = got.astype(np.float64)
    x_q = quantized_activations(name, x)
    magnitude = np.abs(x_q) @ np.abs(w).T
    # fp32 rounding: the products' scales, the lanes' sums (at most n_cols/8 adds), the tree
    rounding = (x.shape[1] / 8 + 16) * 2.0**-23 * magnitude
    quantization = activation_error(name, x) @ np.abs(w).T

    error = np.abs(got - x.astype(np.float64) @ w.T)
    bound = quantization + rounding
    assert np.all(error <= bound), f"{name}: worst error / bound {np.max(error / bound):.3g}"
    error = np.abs(got - x_q @ w.T)
    assert np.all(error <= rounding), (
        f"{name}: worst error / fp32 bound {np.max(error / rounding):.3g}"
    )


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical: stricter than array_equal (tells -0 from +0, and NaN equals itself)."""
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def case(name: str, n_cols: int, n_rows: int = 37, n_tokens: int = 5, seed: int = 0):
    rng = np.random.default_rng([seed, n_cols, ALL_TYPES.index(name)])
    w = random_weights(name, n_rows, n_cols, rng)
    x = rng.standard_normal((n_tokens, n_cols)).astype(np.float32)
    x[:, : n_cols // 4] *= 20  # blocks of different magnitudes
    return w, x


def run(name: str, w: np.ndarray, x: np.ndarray, n_rows: int = 37, threads: int = 1, **kw):
    """One thread unless a test asks: a busy machine makes every OpenMP barrier wait."""
    return mm.matmul(w, by_name(name).id, n_rows, x.shape[1], x, threads=threads, **kw)


CASES = [(name, n_cols) for name in ALL_TYPES for n_cols in COLUMNS[name]]


@pytest.mark.parametrize(("name", "n_cols"), CASES)
def test_close_to_float64(name, n_cols):
    w, x = case(name, n_cols)
    got = run(name, w, x)
    assert got.shape == (5, 37) and got.dtype == np.float32
    assert_accurate(name, got, dequantize(name, w, 37, n_cols), x)


@pytest.mark.parametrize("kernels", SIMD_SETS)
@pytest.mark.parametrize(("name", "n_cols"), CASES)
def test_simd_equals_reference(name, n_cols, kernels):
    w, x = case(name, n_cols, n_tokens=6)
    expected = run(name, w, x, kernels="reference")
    assert same_bits(run(name, w, x, kernels=kernels), expected)


@pytest.mark.parametrize("kernels", ["reference", *SIMD_SETS])
@pytest.mark.parametrize("name", ALL_TYPES)
def test_batch_size_does_not_change_outputs(name, kernels):
    n_cols = COLUMNS[name][-1]
    w, x = case(name, n_cols, n_tokens=17)
    one_by_one = np.concatenate([run(name, w, x[t : t + 1], kernels=kernels) for t in range(17)])
    for n_tokens in (1, 2, 3, 5, 8, 17):
        batch = run(name, w, x[:n_tokens], kernels=kernels)
        assert same_bits(batch, one_by_one[:n_tokens]), n_tokens


@pytest.mark.parametrize("name", ["Q8_0", "Q5_0", "Q4_K", "Q5_K", "Q6_K"])
def test_a_matrix_too_big_for_the_caches_gives_the_same_bits_at_every_batch_size(name):
    # Past 16 MiB a decode step of up to 16 tokens reads the matrix a row at a time (the
    # output projection of a large vocabulary): it must agree with the tiled path and itself.
    n_cols = 640 if name in Q8_0_TYPES else 768
    n_rows = (17 << 20) // (n_cols * by_name(name).block_bytes // by_name(name).block_elems) + 3
    w, x = case(name, n_cols, n_rows=n_rows, n_tokens=17)
    for kernels in SIMD_SETS:
        whole = run(name, w, x, n_rows=n_rows, kernels=kernels)  # 17 tokens: the tiled path
        for n_tokens in (1, 2, 8, 16):
            assert same_bits(
                run(name, w, x[:n_tokens], n_rows=n_rows, kernels=kernels), whole[:n_tokens]
            ), (kernels, n_tokens)


@pytest.mark.parametrize(
    ("name", "n_cols"),
    [(name, 2304) for name in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS")]
    + [("Q8_0", 288), ("Q8_0", 640)],
)
def test_interleaved_layouts_in_every_tile_shape(name, n_cols):
    # The AVX-512 K-quant kernel reads two groups of eight rows side by side, one group (twice)
    # for a few tokens, and tokens eight at a time: 29 rows make a block of sixteen, then one of
    # thirteen whose second group is partial; 1..19 tokens cover every token count per pass.
    # AVX2's Q8_0 prefill takes rows two by two and tokens three at a time over whole groups,
    # then the partial group (one block of 288 columns, four of 640) a row at a time.
    w, x = case(name, n_cols, n_rows=29, n_tokens=19)
    expected = run(name, w, x, n_rows=29, kernels="reference")
    for kernels in SIMD_SETS:
        for n_tokens in (1, 2, 4, 5, 7, 8, 9, 16, 19):
            got = run(name, w, x[:n_tokens], n_rows=29, kernels=kernels)
            assert same_bits(got, expected[:n_tokens]), (kernels, n_tokens)


# Per type: where a block's codes, its sub-block scales and its d lie, and the scale bytes at
# the two ends of their range (Q6_K's int8 -128 and 127; Q3_K's and IQ4_XS's six-bit -32, 31)
EXTREME_LAYOUTS = {
    "Q6_K": (slice(0, 192), slice(192, 208), (0x80, 0x7F), 208),
    "Q3_K": (slice(0, 96), slice(96, 108), (0x00, 0xFF), 108),
    "IQ4_XS": (slice(8, 136), slice(2, 8), (0x00, 0xFF), 0),
}


def extreme_offset_codes(name: str, n_rows: int, n_cols: int) -> np.ndarray:
    """Rows whose codes all sit at one end of their range (alternately the low and the high:
    Q6_K -32 and 31, Q3_K -4 and 3, IQ4_XS -127 and 113), with every sub-block scale at one
    end (pairs of rows alike) and d = 1."""
    codes, scales, (low, high), d = EXTREME_LAYOUTS[name]
    blocks = np.zeros((n_rows, n_cols // 256, by_name(name).block_bytes), np.uint8)
    blocks[1::2, :, codes] = 0xFF
    blocks[:, :, scales] = np.where((np.arange(n_rows) // 2 % 2 == 0)[:, None, None], low, high)
    blocks[:, :, d : d + 2] = np.frombuffer(np.float16(1.0).tobytes(), np.uint8)
    return blocks.reshape(-1)


@pytest.mark.parametrize("name", sorted(EXTREME_LAYOUTS))
def test_offset_codes_at_their_extremes_give_the_reference_bits(name):
    # Prefill multiplies these codes less their offset by the activations plus 128 (unsigned),
    # matmul_kx8.h's kx8_biased: its largest sums come from codes, scales and activations all
    # at the ends of their ranges. Q8_K quantizes a block of -1s to -128, and a block of 1s
    # with one element of -1.01 to 127 (that one -128).
    n_rows, n_cols, n_tokens = 16, 512, 19
    w = extreme_offset_codes(name, n_rows, n_cols)
    x = np.ones((n_tokens, n_cols), np.float32)
    x[0::2] = -1
    x[1::2, ::256] = -1.01
    x[n_tokens // 2 :, ::3] *= -1  # and mixed signs
    expected = run(name, w, x, n_rows=n_rows, kernels="reference")
    for kernels in SIMD_SETS:
        for count in (1, 8, 9, n_tokens):
            got = run(name, w, x[:count], n_rows=n_rows, kernels=kernels)
            assert same_bits(got, expected[:count]), (kernels, count)


# Products of the matrix in argv[1] with its first 1 and 8 tokens, saved to argv[2]
PRODUCTS_IN_A_FRESH_PROCESS = """
import sys
import numpy as np
from llamay._core import matmul as mm
given = np.load(sys.argv[1])
w, x, w_type, n_rows = given["w"], given["x"], int(given["w_type"]), int(given["n_rows"])
products = [mm.matmul(w, w_type, n_rows, x.shape[1], x[:n], threads=2) for n in (1, 8)]
np.savez(sys.argv[2], *products)
"""


@pytest.mark.parametrize("mode", ["l1", "l2"])
def test_where_the_weights_are_prefetched_changes_no_result(mode, tmp_path):
    # LLAMAY_PREFETCH (csrc/prefetch.h) is read as the library loads, so each mode runs in a
    # process of its own. A matrix past 16 MiB: one token reads one group at a time, eight
    # tokens two groups side by side, each with its own prefetch addresses.
    name, n_cols = "Q4_K", 768
    n_rows = (17 << 20) // (n_cols * by_name(name).block_bytes // by_name(name).block_elems)
    w, x = case(name, n_cols, n_rows=n_rows, n_tokens=8)
    given, saved = tmp_path / "given.npz", tmp_path / "products.npz"
    np.savez(given, w=w, x=x, w_type=by_name(name).id, n_rows=n_rows)
    subprocess.run(
        [sys.executable, "-c", PRODUCTS_IN_A_FRESH_PROCESS, str(given), str(saved)],
        env={**os.environ, "LLAMAY_PREFETCH": mode},
        cwd=tmp_path,  # the installed llamay, not a source tree's under the working directory
        check=True,
    )
    products = np.load(saved)
    for i, n_tokens in enumerate((1, 8)):
        here = run(name, w, x[:n_tokens], n_rows=n_rows, threads=2)
        assert same_bits(products[f"arr_{i}"], here), n_tokens


@pytest.mark.parametrize("name", ALL_TYPES)
def test_thread_count_does_not_change_outputs(name):
    n_cols = COLUMNS[name][-1]
    w, x = case(name, n_cols, n_rows=70, n_tokens=7)
    single = run(name, w, x, n_rows=70, threads=1)
    for threads in (2, 3):
        assert same_bits(run(name, w, x, n_rows=70, threads=threads), single), threads


@pytest.mark.parametrize("name", ["Q8_0", "Q4_K", "F16"])
def test_row_slices_do_not_change_outputs(name):
    n_cols = COLUMNS[name][-1]
    w, x = case(name, n_cols, n_rows=37, n_tokens=3)
    row_bytes = len(w) // 37
    full = run(name, w, x)
    for start, stop in [(0, 1), (1, 6), (5, 37), (36, 37)]:
        part = run(name, w[start * row_bytes : stop * row_bytes], x, n_rows=stop - start)
        assert same_bits(part, np.ascontiguousarray(full[:, start:stop]))


def test_edge_activations():
    """Zero rows, tiny values whose products underflow, and huge ones whose fp16 scale
    overflows (NaN outputs): still the same bits in every kernel set."""
    w, x = case("Q8_0", 640, n_tokens=4)
    x[0] = 0
    x[1] *= 1e-30
    x[2] *= 1e30
    x[3, ::2] = 0
    expected = run("Q8_0", w, x, kernels="reference")
    assert np.all(expected[0] == 0) and not np.any(np.signbit(expected[0]))
    assert np.all(np.isnan(expected[2]))
    for kernels in SIMD_SETS:
        assert same_bits(run("Q8_0", w, x, kernels=kernels), expected)
    for name in ("F32", "F16"):
        wf, _ = case(name, 17)
        xf = np.full((2, 17), 1e-30, dtype=np.float32)
        xf[1] = -xf[1]
        ref = run(name, wf, xf, kernels="reference")
        for kernels in SIMD_SETS:
            assert same_bits(run(name, wf, xf, kernels=kernels), ref)


def test_gguf_quantized_weights_match_float64():
    """Weights from gguf-py's own quantizer, not random bytes."""
    rng = np.random.default_rng(7)
    dense = rng.standard_normal((16, 512)).astype(np.float32)
    x = rng.standard_normal((3, 512)).astype(np.float32)
    for name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"):
        qtype = GGMLQuantizationType[name]
        w = quants.quantize(dense, qtype).reshape(-1)
        assert_accurate(name, run(name, w, x, n_rows=16), dequantize(name, w, 16, 512), x)


def test_best_kernel_set_is_the_fastest_this_cpu_runs():
    assert mm.best_kernel_set() == mm.kernel_sets()[-1]
    assert mm.kernel_sets()[0] == "reference"


def test_rejects_what_it_cannot_multiply():
    x = np.zeros((1, 32), dtype=np.float32)
    with pytest.raises(UnsupportedModel, match="I32"):
        mm.matmul(np.zeros(128, np.uint8), by_name("I32").id, 1, 32, x)
    with pytest.raises(UnsupportedModel, match="Q4_K"):
        mm.matmul(np.zeros(144, np.uint8), by_name("Q4_K").id, 1, 32, x)
    with pytest.raises(ValueError, match="bytes"):
        mm.matmul(np.zeros(10, np.uint8), by_name("Q8_0").id, 1, 32, x)
    with pytest.raises(ValueError, match="columns"):
        mm.matmul(np.zeros(34, np.uint8), by_name("Q8_0").id, 1, 32, np.zeros((1, 64), np.float32))
    with pytest.raises(ValueError, match="unknown kernel set"):
        mm.matmul(np.zeros(34, np.uint8), by_name("Q8_0").id, 1, 32, x, kernels="avx9")
    foreign = "avx2" if "neon" in mm.kernel_sets() else "neon"  # another architecture's set
    with pytest.raises(UnsupportedCPU, match=f"no kernel set '{foreign}'"):
        mm.matmul(np.zeros(34, np.uint8), by_name("Q8_0").id, 1, 32, x, kernels=foreign)


@pytest.mark.parametrize("name", ["Q4_K", "Q5_K", "Q6_K"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_k_quants_at_the_ends_of_their_integer_ranges(name, sign):
    """Every quant and scale at its largest, activations all at one end of int8 (-128 or
    127): the widest integer sums a super-block can make, where an int16 sum that overflowed
    in the interleaved kernels would show."""
    t = by_name(name)
    block = np.full(t.block_bytes, 0xFF, dtype=np.uint8)
    if name == "Q6_K":
        block[-2 - 16 : -2] = 127  # the int8 scales at their largest; then d
    half = np.array([0.01], dtype=np.float16).view(np.uint8)
    if name in ("Q4_K", "Q5_K"):
        block[0:2] = block[2:4] = half  # d and dmin
    else:
        block[-2:] = half
    n_rows, n_cols = 19, 512
    w = np.tile(block, n_rows * n_cols // 256)
    x = np.full((3, n_cols), sign, dtype=np.float32)
    expected = run(name, w, x, n_rows=n_rows, kernels="reference")
    for kernels in SIMD_SETS:
        assert same_bits(run(name, w, x, n_rows=n_rows, kernels=kernels), expected), kernels
