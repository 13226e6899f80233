"""ggml blocks to float32 and back, by type name: typed wrappers over llamay._core.quants.

Every format llamay runs dequantizes here, bit-exact with ggml; quantization covers the formats
llamay writes or feeds its kernels (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_K, MXFP4
and Q2_K .. Q6_K), as llama-quantize writes them, with or without an importance matrix.
"""

from __future__ import annotations

import math

import numpy as np

from llamay._core import quants as _kernels
from llamay.errors import UnsupportedModel
from llamay.gguf.types import REFUSED, GGMLType, by_name

__all__ = ["dequantize", "quantize"]


def _resolve(type: str | GGMLType) -> GGMLType:
    t = by_name(type) if isinstance(type, str) else type
    if t.name in REFUSED:
        raise UnsupportedModel(
            f"{t.name} weights are not supported: llamay does not run IQ1 weights (IQ1_S, IQ1_M); "
            "use a file quantized to another type, such as Q4_K_M"
        )
    return t


def dequantize(
    data: np.ndarray, type: str | GGMLType, shape: tuple[int, ...] | None = None
) -> np.ndarray:
    """The float32 values of the ggml blocks in `data` (raw bytes, any dtype).

    `shape` is the numpy shape of the result (the reversed GGUF shape); without it the result is
    flat. Its last dimension must hold whole blocks, and it must account for every byte.
    """
    t = _resolve(type)
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if shape is None:
        if raw.size % t.block_bytes:
            raise ValueError(
                f"{raw.size} bytes is not a whole number of {t.name} blocks "
                f"({t.block_bytes} bytes each)"
            )
        return _kernels.dequantize(t.id, raw, raw.size // t.block_bytes * t.block_elems)
    shape = tuple(shape)
    if shape and shape[-1] % t.block_elems:
        raise ValueError(
            f"rows of {shape[-1]} elements do not split into {t.name} blocks "
            f"({t.block_elems} elements each)"
        )
    return _kernels.dequantize(t.id, raw, math.prod(shape)).reshape(shape)


def quantize(x: np.ndarray, type: str | GGMLType, imatrix: np.ndarray | None = None) -> np.ndarray:
    """`x` (converted to float32) as the bytes of ggml blocks of `type`, rows one after another.

    The last dimension of `x` must hold whole blocks: a block never spans two rows. `imatrix`
    (one importance weight per column) makes the types that take one (Q4_0..Q5_1, Q2_K..Q6_K)
    weight each column's error by it, as llama-quantize does given an importance matrix.
    """
    t = _resolve(type)
    values = np.ascontiguousarray(x, dtype=np.float32)
    if values.ndim and values.shape[-1] % t.block_elems:
        raise ValueError(
            f"rows of {values.shape[-1]} elements do not split into {t.name} blocks "
            f"({t.block_elems} elements each)"
        )
    if imatrix is None:
        return _kernels.quantize(t.id, values.reshape(-1))
    n_per_row = values.shape[-1] if values.ndim else 1
    out = np.empty(t.nbytes(values.size), dtype=np.uint8)
    weights = np.ascontiguousarray(imatrix, dtype=np.float32).reshape(-1)
    f32 = by_name("F32")
    raw = values.reshape(-1).view(np.uint8)
    _kernels.convert_rows(f32.id, raw, t.id, out, values.size // n_per_row, n_per_row, weights)
    return out
