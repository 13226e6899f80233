"""The quantization kernels: bit-exact with ggml (through gguf-py, its Python reference) and,
for every SIMD kernel, with its scalar reference."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf import quants as gguf_quants

from llamay._core import quants as kernels
from llamay.errors import UnsupportedCPU, UnsupportedModel
from llamay.gguf import quant
from llamay.gguf.types import BY_NAME, REFUSED

# Q8_1 is ggml's activation format for Q4_1/Q5_1 dot products, never a weight: no kernel here.
NOT_RUN = REFUSED | {"Q8_1"}
DEQUANTIZED = sorted(name for name in BY_NAME if name not in NOT_RUN)
QUANTIZED_BY_GGUF_PY = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4"]
SIMD_QUANTIZED = ["F16", "Q8_0", "Q8_K"]
KERNEL_SETS = kernels.kernel_sets()
SIMD_SETS = [k for k in KERNEL_SETS if k != "reference"]

# Byte offsets of the fp16 scales in each block format: random bytes there would make most
# values inf or NaN, so the "sane" random blocks get finite scales written over them.
HALF_SCALE_OFFSETS = {
    "Q4_0": (0,),
    "Q4_1": (0, 2),
    "Q5_0": (0,),
    "Q5_1": (0, 2),
    "Q8_0": (0,),
    "Q2_K": (80, 82),
    "Q3_K": (108,),
    "Q4_K": (0, 2),
    "Q5_K": (0, 2),
    "Q6_K": (208,),
    "IQ2_XXS": (0,),
    "IQ2_XS": (0,),
    "IQ2_S": (0,),
    "IQ3_XXS": (0,),
    "IQ3_S": (0,),
    "IQ4_NL": (0,),
    "IQ4_XS": (0,),
    "TQ1_0": (52,),
    "TQ2_0": (64,),
    "Q1_0": (0,),
    "F16": (0,),
}
# Plain numbers gguf-py does not convert: numpy's astype(float32) is the reference.
NUMPY_DTYPES = {"I8": "i1", "I16": "<i2", "I32": "<i4", "I64": "<i8", "F64": "<f8"}


def gguf_type(name: str) -> GGMLQuantizationType:
    return GGMLQuantizationType[name]


def sane_blocks(rng: np.random.Generator, name: str, n_blocks: int) -> np.ndarray:
    """Random blocks whose scales and plain values are finite, shape (n_blocks, block bytes)."""
    t = BY_NAME[name]
    raw = rng.integers(0, 256, (n_blocks, t.block_bytes), dtype=np.uint8)
    for offset in HALF_SCALE_OFFSETS.get(name, ()):
        halves = rng.uniform(-3, 3, n_blocks).astype(np.float16)
        raw[:, offset : offset + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
    if name == "Q8_K":
        raw[:, :4] = rng.uniform(-0.1, 0.1, n_blocks).astype("<f4").view(np.uint8).reshape(-1, 4)
    if name == "MXFP4":  # an E8M0 exponent of 2^-17 .. 2^12
        raw[:, 0] = rng.integers(110, 140, n_blocks)
    if name in ("F32", "BF16", "F64"):
        dtype = "<f8" if name == "F64" else "<f4"
        values = (rng.standard_normal(n_blocks) * 1e3).astype(dtype).view(np.uint8)
        raw = values.reshape(n_blocks, -1)[:, -t.block_bytes :]  # BF16: an fp32's upper half
    return np.ascontiguousarray(raw)


def quantized_floats(rng: np.random.Generator, name: str, n_blocks: int) -> np.ndarray | None:
    """Random floats quantized by gguf-py, where it quantizes to `name`: realistic blocks."""
    x = rng.standard_normal((n_blocks, BY_NAME[name].block_elems)).astype(np.float32)
    x *= rng.uniform(0.01, 10, (n_blocks, 1)).astype(np.float32)
    try:
        blocks = gguf_quants.quantize(x, gguf_type(name))
    except NotImplementedError:
        return None
    return blocks.view(np.uint8).reshape(n_blocks, -1)


def expected_dequantize(blocks: np.ndarray, name: str) -> np.ndarray:
    """ggml's values for `blocks`: gguf-py's, or a numpy port where gguf-py has no dequantizer."""
    blocks = blocks.reshape(-1, BY_NAME[name].block_bytes)
    if name in NUMPY_DTYPES:
        return blocks.reshape(-1).view(NUMPY_DTYPES[name]).astype(np.float32)
    if name == "Q8_K":  # ggml: y = d * qs
        d = blocks[:, :4].copy().view("<f4")
        return (d * blocks[:, 4:260].view(np.int8).astype(np.float32)).reshape(-1)
    if name == "Q1_0":  # ggml: bit j of qs set -> +d, clear -> -d
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)
        bits = np.unpackbits(blocks[:, 2:], axis=1, bitorder="little")
        return np.where(bits == 1, d, -d).reshape(-1)
    return gguf_quants.dequantize(blocks, gguf_type(name)).reshape(-1)


def q8_K_reference(x: np.ndarray) -> np.ndarray:
    """A numpy port of ggml's quantize_row_q8_K_ref (gguf-py has no Q8_K); bsums of an all-zero
    block, which ggml leaves unwritten, are 0."""
    blocks = x.reshape(-1, 256).astype(np.float32)
    magnitudes = np.abs(blocks)
    amax = magnitudes.max(axis=1)
    first = np.argmax(magnitudes == amax[:, None], axis=1)  # ggml keeps the first on ties
    signed_max = blocks[np.arange(len(blocks)), first]
    zero = amax == 0
    with np.errstate(divide="ignore"):
        iscale = np.where(zero, np.float32(0), np.float32(-127) / signed_max).astype(np.float32)
    shifted = (iscale[:, None] * blocks + np.float32(12582912)).astype(np.float32)
    nearest = (shifted.view(np.int32) & 0x7FFFFF) - 0x400000  # ggml's nearest_int
    qs = np.minimum(nearest, 127).astype(np.int8)
    bsums = qs.reshape(-1, 16, 16).astype(np.int16).sum(axis=2, dtype=np.int16)
    with np.errstate(divide="ignore"):
        d = np.where(zero, np.float32(0), np.float32(1) / iscale).astype("<f4")
    parts = [d.view(np.uint8).reshape(-1, 4), qs.view(np.uint8), bsums.astype("<i2").view(np.uint8)]
    return np.concatenate(parts, axis=1).reshape(-1)


def activation_like(rng: np.random.Generator, n_blocks: int, block: int) -> np.ndarray:
    """Floats with the awkward cases of a quantizer: scales from tiny to huge, all-zero and
    constant blocks, exact ties after scaling, a largest magnitude of either sign."""
    x = rng.standard_normal((n_blocks, block)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-6, 4, (n_blocks, 1))).astype(np.float32)
    x[0] = 0
    x[1] = -2.5
    # amax 127 -> scale 1: every x + 0.5 is a tie (Q8_0 rounds away from zero, Q8_K to even)
    x[2] = rng.integers(-127, 127, block) + np.float32(0.5)
    x[2, 5] = 127
    x[3] = x[2]
    x[3, 5] = -127
    x[4, 7] = -np.abs(x[4]).max() * 2  # the largest magnitude is negative
    x[5] = np.float32(0.25)
    x[5, 9], x[5, 10] = 3.0, -3.0  # two elements share the largest magnitude: the first counts
    return x.reshape(-1)


# ---------------------------------------------------------------------------- dequantize


@pytest.mark.parametrize("name", DEQUANTIZED)
def test_dequantize_equals_ggml(name: str) -> None:
    rng = np.random.default_rng(1234)
    t = BY_NAME[name]
    parts = [sane_blocks(rng, name, 48)]
    if (realistic := quantized_floats(rng, name, 48)) is not None:
        parts.append(realistic)
    blocks = np.concatenate(parts).reshape(-1)
    n = blocks.size // t.block_bytes * t.block_elems
    expected = expected_dequantize(blocks, name)
    assert np.isfinite(expected).all()
    for k in KERNEL_SETS:
        got = kernels.dequantize(t.id, blocks, n, k)
        assert got.dtype == np.float32 and got.shape == (n,)
        assert np.array_equal(got, expected), k


@pytest.mark.parametrize("name", DEQUANTIZED)
def test_dequantize_raw_bytes_equals_ggml(name: str) -> None:
    """Any bytes at all, NaN and inf scales included."""
    t = BY_NAME[name]
    blocks = np.random.default_rng(99).integers(0, 256, 64 * t.block_bytes, dtype=np.uint8)
    n = 64 * t.block_elems
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0, and the like
        expected = expected_dequantize(blocks, name)
    for k in KERNEL_SETS:
        assert np.array_equal(kernels.dequantize(t.id, blocks, n, k), expected, equal_nan=True), k


def test_large_tensors_split_over_threads_without_changing_results() -> None:
    """Big enough for several OpenMP chunks (65536 elements), with a partial one at the end."""
    rng = np.random.default_rng(5)
    for name in ("Q4_K", "F16", "Q8_0"):
        t = BY_NAME[name]
        n_blocks = 4 * 65536 // t.block_elems + 3
        blocks = sane_blocks(rng, name, n_blocks).reshape(-1)
        got = kernels.dequantize(t.id, blocks, n_blocks * t.block_elems)
        assert np.array_equal(got, expected_dequantize(blocks, name))
    x = rng.standard_normal(4 * 65536 + 96).astype(np.float32)
    expected = gguf_quants.quantize(x, GGMLQuantizationType.Q8_0).reshape(-1)
    assert np.array_equal(kernels.quantize(BY_NAME["Q8_0"].id, x), expected)


def test_dequantize_wrapper_takes_names_types_and_shapes() -> None:
    rng = np.random.default_rng(3)
    blocks = sane_blocks(rng, "Q6_K", 6)
    expected = expected_dequantize(blocks, "Q6_K")
    assert np.array_equal(quant.dequantize(blocks, "q6_k"), expected)
    shaped = quant.dequantize(blocks, BY_NAME["Q6_K"], shape=(3, 512))
    assert shaped.shape == (3, 512)
    assert np.array_equal(shaped.reshape(-1), expected)
    halves = rng.standard_normal(10).astype(np.float16)
    assert np.array_equal(quant.dequantize(halves, "F16"), halves.astype(np.float32))


# ---------------------------------------------------------------------------- quantize


@pytest.mark.parametrize("name", QUANTIZED_BY_GGUF_PY)
def test_quantize_equals_ggml_reference(name: str) -> None:
    t = BY_NAME[name]
    x = activation_like(np.random.default_rng(7), 64, 32)
    expected = gguf_quants.quantize(x.reshape(-1, 256), gguf_type(name)).view(np.uint8).reshape(-1)
    for k in KERNEL_SETS:
        assert np.array_equal(kernels.quantize(t.id, x, k), expected), k


def test_quantize_q8_K_equals_ggml_reference() -> None:
    x = activation_like(np.random.default_rng(8), 48, 256)
    expected = q8_K_reference(x)
    for k in KERNEL_SETS:
        assert np.array_equal(kernels.quantize(BY_NAME["Q8_K"].id, x, k), expected), k


def test_quantize_f32_is_the_values() -> None:
    x = np.random.default_rng(9).standard_normal(100).astype(np.float32)
    assert quant.quantize(x, "F32").tobytes() == x.tobytes()


def fp16_error(v: np.ndarray) -> np.ndarray:
    """The largest rounding error of v stored as fp16: half an ulp, fixed among subnormals."""
    return np.maximum(v * 2.0**-11, 2.0**-25)


# Largest error of dequantize(quantize(x)) per block, from the block's largest magnitude (amax)
# and range (span): half a step (a whole one where the format clips its top level), plus the
# fp16 rounding of the scale times the largest level, plus that of the min.
ROUND_TRIP_BOUNDS = {
    "F16": lambda amax, span: fp16_error(amax),
    "BF16": lambda amax, span: amax * 2.0**-8,
    "Q8_K": lambda amax, span: amax / 127 / 2,
    "Q8_0": lambda amax, span: amax / 127 / 2 + 127 * fp16_error(amax / 127),
    "Q4_0": lambda amax, span: amax / 8 + 8 * fp16_error(amax / 8),
    "Q5_0": lambda amax, span: amax / 16 + 16 * fp16_error(amax / 16),
    "Q4_1": lambda amax, span: span / 15 / 2 + 15 * fp16_error(span / 15) + fp16_error(amax),
    "Q5_1": lambda amax, span: span / 31 / 2 + 31 * fp16_error(span / 31) + fp16_error(amax),
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_BOUNDS))
def test_round_trip_error_is_within_the_format_bound(name: str) -> None:
    t = BY_NAME[name]
    rows = np.random.default_rng(11).standard_normal((16, 256)).astype(np.float32)
    rows *= np.float32(10.0) ** np.arange(-4, 4, 0.5, dtype=np.float32)[:, None]
    back = quant.dequantize(quant.quantize(rows, name), name, shape=rows.shape)
    blocks = rows.reshape(-1, t.block_elems)
    error = np.abs(back.reshape(blocks.shape) - blocks)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    span = blocks.max(axis=1, keepdims=True) - blocks.min(axis=1, keepdims=True)
    assert (error <= ROUND_TRIP_BOUNDS[name](amax, span) * 1.0001).all()  # fp32 slack
    assert (error > 0).any()  # the test would notice a format stored losslessly by mistake


WEIGHTED = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


@pytest.mark.parametrize("name", WEIGHTED)
def test_importance_weights_lower_the_weighted_error(name: str) -> None:
    # llama-quantize's reason for an importance matrix: the columns that matter most are
    # kept closest (tests/data/quantize holds the bytes to llama-quantize's)
    rng = np.random.default_rng(13)
    rows = rng.standard_normal((32, 512)).astype(np.float32)
    weights = rng.uniform(0.05, 4.0, 512).astype(np.float32)

    def weighted_error(blocks: np.ndarray) -> float:
        back = quant.dequantize(blocks, name, shape=rows.shape)
        return float(((back - rows) ** 2 * weights).sum())

    plain, weighted = quant.quantize(rows, name), quant.quantize(rows, name, weights)
    assert weighted.nbytes == plain.nbytes
    assert weighted_error(weighted) < 0.95 * weighted_error(plain)


@pytest.mark.parametrize("name", ["Q8_0", "MXFP4", "F16", "BF16"])
def test_types_without_a_weighted_fit_ignore_importance_weights(name: str) -> None:
    rows = np.random.default_rng(14).standard_normal((4, 256)).astype(np.float32)
    weights = np.linspace(0.1, 5.0, 256, dtype=np.float32)
    assert np.array_equal(quant.quantize(rows, name, weights), quant.quantize(rows, name))


def test_convert_rows_checks_its_arguments() -> None:
    f16, q4_k = BY_NAME["F16"], BY_NAME["Q4_K"]
    src = np.zeros(2 * 256 * 2, np.uint8)
    dst = np.zeros(2 * 144, np.uint8)
    kernels.convert_rows(f16.id, src, q4_k.id, dst, 2, 256)
    with pytest.raises(ValueError, match="rows of 128 elements do not split into Q4_K blocks"):
        kernels.convert_rows(f16.id, src[:512], q4_k.id, dst, 2, 128)
    with pytest.raises(ValueError, match="2 rows of Q4_K take 288 bytes, got 287"):
        kernels.convert_rows(f16.id, src, q4_k.id, dst[:-1], 2, 256)
    with pytest.raises(ValueError, match="128 importance weights for rows of 256 elements"):
        kernels.convert_rows(f16.id, src, q4_k.id, dst, 2, 256, np.ones(128, np.float32))
    with pytest.raises(ValueError, match="does not quantize to IQ2_XS"):
        kernels.convert_rows(f16.id, src, BY_NAME["IQ2_XS"].id, dst, 2, 256)


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("F16", np.array([0x7C00], "<u2")),  # inf
        ("F16", np.array([0xFE01], "<u2")),  # NaN
        ("BF16", np.array([0x7F80], "<u2")),
        ("F32", np.array([np.nan], "<f4")),
    ],
)
def test_first_invalid_block_finds_inf_and_nan_values(name: str, bad: np.ndarray) -> None:
    t = BY_NAME[name]
    good = np.ones(10, "<f4").astype("<f2" if name == "F16" else "<f4")
    if name == "BF16":
        good = (np.ones(10, "<f4").view("<u4") >> 16).astype("<u2")
    data = np.concatenate([good.view(np.uint8), bad.view(np.uint8), good.view(np.uint8)])
    assert kernels.first_invalid_block(t.id, data) == 10
    assert kernels.first_invalid_block(t.id, good.view(np.uint8)) == -1


def test_first_invalid_block_checks_block_scales() -> None:
    rng = np.random.default_rng(15)
    for name in ("Q4_K", "Q2_K", "Q6_K", "Q8_0", "Q4_1"):
        t = BY_NAME[name]
        blocks = sane_blocks(rng, name, 8)
        assert kernels.first_invalid_block(t.id, blocks.reshape(-1)) == -1
        last_scale = HALF_SCALE_OFFSETS[name][-1]
        blocks[5, last_scale : last_scale + 2] = np.array([0x7C00], "<u2").view(np.uint8)
        assert kernels.first_invalid_block(t.id, blocks.reshape(-1)) == 5, name
    mxfp4 = sane_blocks(rng, "MXFP4", 4)
    mxfp4[2, 0] = 0xFF  # an E8M0 exponent of NaN
    assert kernels.first_invalid_block(BY_NAME["MXFP4"].id, mxfp4.reshape(-1)) == 2


# ---------------------------------------------------------------------------- SIMD == scalar


def as_bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint32)


@pytest.mark.parametrize("kernel_set", SIMD_SETS)
def test_simd_f16_dequantize_is_the_reference_for_every_half(kernel_set: str) -> None:
    every_half = np.arange(65536, dtype=np.uint16).view(np.uint8)
    fast = kernels.dequantize(BY_NAME["F16"].id, every_half, 65536, kernel_set)
    slow = kernels.dequantize(BY_NAME["F16"].id, every_half, 65536, "reference")
    assert np.array_equal(as_bits(fast), as_bits(slow))
    # and both are the IEEE value (NaNs aside, where F16C quiets a signalling one)
    halves = every_half.view(np.float16)
    finite = ~np.isnan(halves)
    assert np.array_equal(fast[finite], halves[finite].astype(np.float32))


@pytest.mark.parametrize("kernel_set", SIMD_SETS)
@pytest.mark.parametrize("name", DEQUANTIZED)
def test_simd_dequantize_is_the_reference_bit_for_bit(name: str, kernel_set: str) -> None:
    # every type in every set: the SIMD rows (the deq column of csrc/ggml_types.h) and the
    # scalar references the table gives a set where it has none
    t = BY_NAME[name]
    rng = np.random.default_rng(21)
    blocks = np.concatenate(
        [
            rng.integers(0, 256, 256 * t.block_bytes, dtype=np.uint8),
            sane_blocks(rng, name, 256).reshape(-1),
        ]
    )
    n = 512 * t.block_elems
    fast = kernels.dequantize(t.id, blocks, n, kernel_set)
    slow = kernels.dequantize(t.id, blocks, n, "reference")
    assert np.array_equal(as_bits(fast), as_bits(slow))


def awkward_floats(rng: np.random.Generator, n_blocks: int, block: int) -> np.ndarray:
    """activation_like, plus blocks the SIMD code hands to the scalar one: inf, NaN, blocks so
    small that their inverse scale overflows; and random bit patterns of every kind."""
    x = activation_like(rng, n_blocks, block).reshape(n_blocks, block)
    x[6, 3] = np.inf
    x[7, 4] = -np.inf
    x[8, 5] = np.nan
    x[9, -1] = np.nan
    x[10] = rng.standard_normal(block).astype(np.float32) * np.float32(1e-39)  # subnormal
    x[11] = rng.standard_normal(block).astype(np.float32) * np.float32(1e-37)
    x[12] = rng.integers(0, 2**32, block, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x[13] = np.float32(3e38) * np.sign(rng.standard_normal(block)).astype(np.float32)
    return x.reshape(-1)


@pytest.mark.parametrize("kernel_set", SIMD_SETS)
@pytest.mark.parametrize("name", SIMD_QUANTIZED)
def test_simd_quantize_is_the_reference_bit_for_bit(name: str, kernel_set: str) -> None:
    t = BY_NAME[name]
    x = awkward_floats(np.random.default_rng(31), 64, 256)
    fast = kernels.quantize(t.id, x, kernel_set)
    assert np.array_equal(fast, kernels.quantize(t.id, x, "reference"))


def test_f16_quantize_rounds_to_nearest_even_like_ieee() -> None:
    rng = np.random.default_rng(41)
    bits = rng.integers(0x30000000, 0x48000000, 1 << 16, dtype=np.uint64).astype(np.uint32)
    edges = [0x477FF000, 0x477FEFFF, 0x38800000, 0x387FF000, 0x33000000, 0x33000001, 0x7F800000]
    bits = np.concatenate([bits, np.array(edges, dtype=np.uint32)])
    x = np.concatenate([bits, bits | 0x80000000]).view(np.float32)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    for k in KERNEL_SETS:
        got = kernels.quantize(BY_NAME["F16"].id, x, k)
        assert np.array_equal(got.view(np.uint16), expected.view(np.uint16))


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_iq1_is_refused_by_name(name: str) -> None:
    t = BY_NAME[name]
    with pytest.raises(UnsupportedModel, match=f"{name} weights.*does not run IQ1 weights"):
        quant.dequantize(np.zeros(t.block_bytes, np.uint8), name)
    with pytest.raises(UnsupportedModel, match=name):
        quant.dequantize(np.zeros(t.block_bytes, np.uint8), t)
    with pytest.raises(UnsupportedModel, match=name):
        quant.quantize(np.zeros(t.block_elems, np.float32), name)


def test_kernel_table_agrees_with_the_type_table() -> None:
    """Every format llamay runs takes exactly one block's bytes per block; others are unknown."""
    for name, t in BY_NAME.items():
        block = np.zeros(t.block_bytes, np.uint8)
        if name in NOT_RUN:
            with pytest.raises(ValueError, match=f"no kernel for ggml type id {t.id}: unknown"):
                kernels.dequantize(t.id, block, t.block_elems)
            continue
        assert kernels.dequantize(t.id, block, t.block_elems).shape == (t.block_elems,)
        with pytest.raises(
            ValueError, match=f"take {t.block_bytes} bytes, got {t.block_bytes + 1}"
        ):
            kernels.dequantize(t.id, np.zeros(t.block_bytes + 1, np.uint8), t.block_elems)


def test_type_table_agrees_with_gguf_py() -> None:
    """The one table (csrc/ggml_types.h) against gguf-py's: ids, block sizes and bytes."""
    assert set(BY_NAME) <= {t.name for t in GGMLQuantizationType}
    for name, t in BY_NAME.items():
        assert gguf_type(name).value == t.id, name
        if name != "Q8_1":  # gguf-py keeps Q8_1's old fp32 scales (40 bytes); ggml's has 36
            assert GGML_QUANT_SIZES[gguf_type(name)] == (t.block_elems, t.block_bytes), name
    assert {"IQ1_S", "IQ1_M"} == REFUSED


def test_unknown_kernel_sets_are_rejected() -> None:
    q8_0 = BY_NAME["Q8_0"]
    with pytest.raises(ValueError, match="unknown kernel set 'avx9'"):
        kernels.dequantize(q8_0.id, np.zeros(34, np.uint8), 32, "avx9")
    with pytest.raises(ValueError, match="unknown kernel set 'avx9'"):
        kernels.quantize(q8_0.id, np.zeros(32, np.float32), "avx9")
    for k in {"reference", "avx2", "avx512", "neon"} - set(KERNEL_SETS):
        with pytest.raises(UnsupportedCPU, match=f"kernel set '{k}'"):
            kernels.dequantize(q8_0.id, np.zeros(34, np.uint8), 32, k)


def test_wrong_lengths_and_types_are_rejected() -> None:
    q4_k, q8_0 = BY_NAME["Q4_K"], BY_NAME["Q8_0"]
    with pytest.raises(ValueError, match="100 elements is not a whole number of Q4_K blocks"):
        kernels.dequantize(q4_k.id, np.zeros(144, np.uint8), 100)
    with pytest.raises(ValueError, match="256 Q4_K elements take 144 bytes, got 143"):
        kernels.dequantize(q4_k.id, np.zeros(143, np.uint8), 256)
    with pytest.raises(ValueError, match="no kernel for ggml type id 99"):
        kernels.dequantize(99, np.zeros(4, np.uint8), 1)
    with pytest.raises(ValueError, match="does not quantize to IQ4_XS; it quantizes to F32, F16"):
        kernels.quantize(BY_NAME["IQ4_XS"].id, np.zeros(256, np.float32))
    with pytest.raises(ValueError, match="40 elements is not a whole number of Q8_0 blocks"):
        kernels.quantize(q8_0.id, np.zeros(40, np.float32))
    with pytest.raises(ValueError, match="35 bytes is not a whole number of Q8_0 blocks"):
        quant.dequantize(np.zeros(35, np.uint8), "Q8_0")
    with pytest.raises(ValueError, match="rows of 48 elements do not split into Q8_0 blocks"):
        quant.dequantize(np.zeros(68, np.uint8), "Q8_0", shape=(4, 16 * 3))
    with pytest.raises(ValueError, match="rows of 48 elements do not split into Q8_0 blocks"):
        quant.quantize(np.zeros((2, 48), np.float32), "Q8_0")
    assert kernels.dequantize(q8_0.id, np.zeros(0, np.uint8), 0).shape == (0,)


# ---------------------------------------------------------------------------- the real model


def test_every_gemma_tensor_dequantizes_like_ggml(gemma_path) -> None:
    from llamay.gguf import read

    tensors = read(gemma_path).tensors.values()
    assert len(tensors) == 236
    rows_per_piece = 4096  # gguf-py's temporaries for a whole embedding table are large
    for tensor in tensors:
        got = tensor.dequantize()
        assert got.shape == tensor.shape[::-1]
        row = tensor.shape[0]
        rows = tensor.data.reshape(-1, tensor.ggml_type.nbytes(row))
        for start in range(0, rows.shape[0], rows_per_piece):
            piece = rows[start : start + rows_per_piece]
            expected = gguf_quants.dequantize(piece, gguf_type(tensor.type)).reshape(-1, row)
            assert np.array_equal(got.reshape(-1, row)[start : start + rows_per_piece], expected), (
                tensor.name
            )


@pytest.mark.parametrize("name", ["Q4_K", "Q5_K", "Q6_K", "Q5_0", "MXFP4"])
def test_quantize_equals_what_llama_quantize_writes(name: str, data_dir) -> None:
    """ggml_quantize_chunk's bytes (no importance matrix: what llama-quantize writes), computed
    by llama.cpp's own library on awkward floats (tools/gen_family_references.py): all-zero,
    constant and non-negative super-blocks, scales from 1e-5 to 1e3."""
    ref = np.load(data_dir / "quants" / "ggml_quantize.npz")
    got = kernels.quantize(BY_NAME[name].id, ref["x"], "reference")
    assert np.array_equal(got, ref[name])
    assert np.array_equal(quant.quantize(ref["x"], name), ref[name])
