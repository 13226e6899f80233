"""Dequantize every ggml block format llamay runs; quantize into the formats its kernels use.

Results are bit-exact with ggml (and gguf-py). `reference=True` runs the scalar reference
kernels instead of the SIMD ones: the same bits, slower; it exists to test exactly that.
Large tensors are split over OpenMP threads by blocks.
"""

from libc.stdint cimport uint8_t

import numpy as np


cdef const llamay_quant_type *_type_of(int type_id) except NULL:
    cdef const llamay_quant_type *t = llamay_quant_type_of(type_id)
    if t == NULL:
        raise ValueError(
            f"no kernel for ggml type id {type_id}: unknown, or a type llamay does not run"
        )
    return t


cdef str _name(const llamay_quant_type *t):
    return t.name.decode("ascii")


def dequantize(int type_id, const uint8_t[::1] data, Py_ssize_t n_elements, bint reference=False):
    """The n_elements values held by `data` (ggml type `type_id`), as a float32 array."""
    cdef const llamay_quant_type *t = _type_of(type_id)
    if n_elements < 0 or n_elements % t.block_elems:
        raise ValueError(
            f"{n_elements} elements is not a whole number of {_name(t)} blocks "
            f"({t.block_elems} elements each)"
        )
    cdef Py_ssize_t expected = n_elements // t.block_elems * t.block_bytes
    if data.shape[0] != expected:
        raise ValueError(
            f"{n_elements} {_name(t)} elements take {expected} bytes, got {data.shape[0]}"
        )
    out = np.empty(n_elements, dtype=np.float32)
    cdef float[::1] y = out
    if n_elements:
        with nogil:
            llamay_dequantize(t, &data[0], &y[0], n_elements, reference)
    return out


def quantize(int type_id, const float[::1] x, bint reference=False):
    """`x` quantized to ggml type `type_id`, as the bytes of its blocks (a uint8 array)."""
    cdef const llamay_quant_type *t = _type_of(type_id)
    if t.from_float == NULL:
        raise ValueError(
            f"llamay does not quantize to {_name(t)}; it quantizes to {_quantizable()}"
        )
    cdef Py_ssize_t n = x.shape[0]
    if n % t.block_elems:
        raise ValueError(
            f"{n} elements is not a whole number of {_name(t)} blocks "
            f"({t.block_elems} elements each)"
        )
    out = np.empty(n // t.block_elems * t.block_bytes, dtype=np.uint8)
    cdef uint8_t[::1] y = out
    if n:
        with nogil:
            llamay_quantize(t, &x[0], &y[0], n, reference)
    return out


cdef str _quantizable():
    cdef const llamay_quant_type *t
    names = []
    for type_id in range(256):
        t = llamay_quant_type_of(type_id)
        if t != NULL and t.from_float != NULL:
            names.append(_name(t))
    return ", ".join(names)
