"""Dequantize every ggml block format llamay runs; quantize into the formats its kernels use;
and the ggml type table itself (csrc/ggml_types.h), for llamay.gguf.types.

Results are bit-exact with ggml (and gguf-py). `kernels` picks the kernel set whose row
functions run ('reference': the scalar references; every set gives the same bits, and tests
check it). Large tensors are split over threads by blocks.
"""

from libc.stdint cimport uint8_t

from llamay._core.kernel_sets cimport usable_kernel_sets, kernel_set_of

import numpy as np


def type_table() -> list:
    """Every ggml type of csrc/ggml_types.h, in id order, as (id, name, block elements, block
    bytes, refused) tuples: the one list of types, read by llamay.gguf.types."""
    cdef const llamay_quant_type *t
    rows = []
    for type_id in range(llamay_ggml_type_ids()):
        t = llamay_ggml_type(type_id)
        if t != NULL:
            rows.append((t.id, _name(t), t.block_elems, t.block_bytes, bool(t.refused)))
    return rows


def kernel_sets() -> list:
    """The kernel sets this build has and this CPU runs, slowest first ('reference' first)."""
    return usable_kernel_sets()


cdef const llamay_quant_type *_type_of(int type_id) except NULL:
    cdef const llamay_quant_type *t = llamay_quant_type_of(type_id)
    if t == NULL:
        raise ValueError(
            f"no kernel for ggml type id {type_id}: unknown, or a type llamay does not run"
        )
    return t


cdef str _name(const llamay_quant_type *t):
    return t.name.decode("ascii")


def dequantize(int type_id, const uint8_t[::1] data, Py_ssize_t n_elements, str kernels="best"):
    """The n_elements values held by `data` (ggml type `type_id`), as a float32 array."""
    cdef int kernel_set = kernel_set_of(kernels)
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
            llamay_dequantize(t, &data[0], &y[0], n_elements, kernel_set)
    return out


def quantize(int type_id, const float[::1] x, str kernels="best"):
    """`x` quantized to ggml type `type_id`, as the bytes of its blocks (a uint8 array)."""
    cdef int kernel_set = kernel_set_of(kernels)
    cdef const llamay_quant_type *t = _type_of(type_id)
    if t.from_float[0] == NULL:
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
            llamay_quantize(t, &x[0], &y[0], n, kernel_set)
    return out


cdef str _quantizable():
    cdef const llamay_quant_type *t
    names = []
    for type_id in range(llamay_ggml_type_ids()):
        t = llamay_quant_type_of(type_id)
        if t != NULL and t.from_float[0] != NULL:
            names.append(_name(t))
    return ", ".join(names)
