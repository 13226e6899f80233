"""Dequantize every ggml block format llamay runs; quantize into the formats its kernels use;
and the ggml type table itself (csrc/ggml_types.h), for llamay.gguf.types.

Results are bit-exact with ggml (and gguf-py). `kernels` picks the kernel set whose row
functions run ('reference': the scalar references; every set gives the same bits, and tests
check it). Large tensors are split over threads by blocks; `convert_rows` runs on the calling
thread with the GIL released, for callers that split the rows themselves.
"""

from libc.stdint cimport int64_t, uint8_t

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


def convert_rows(
    int src_type,
    const uint8_t[::1] src,
    int dst_type,
    uint8_t[::1] dst,
    Py_ssize_t n_rows,
    Py_ssize_t n_per_row,
    const float[::1] imatrix=None,
    str kernels="best",
):
    """Rows of ggml type `src_type` (`src`) into rows of `dst_type`, written into `dst`, on this
    thread with the GIL released. `imatrix` (n_per_row importance weights) makes the types that
    take one (Q4_0..Q5_1, Q2_K..Q6_K) use it, as llama-quantize does; the others ignore it."""
    cdef int kernel_set = kernel_set_of(kernels)
    cdef const llamay_quant_type *t_src = _type_of(src_type)
    cdef const llamay_quant_type *t_dst = _type_of(dst_type)
    if t_dst.from_float[0] == NULL:
        raise ValueError(
            f"llamay does not quantize to {_name(t_dst)}; it quantizes to {_quantizable()}"
        )
    if n_rows < 0:
        raise ValueError(f"{n_rows} rows")
    _check_rows(t_src, src.shape[0], n_rows, n_per_row)
    _check_rows(t_dst, dst.shape[0], n_rows, n_per_row)
    cdef const float *weights = NULL
    if imatrix is not None:
        if imatrix.shape[0] != n_per_row:
            raise ValueError(
                f"{imatrix.shape[0]} importance weights for rows of {n_per_row} elements"
            )
        weights = &imatrix[0]
    cdef int status = 0
    if n_rows:
        with nogil:
            status = llamay_convert_rows(
                t_src, &src[0], t_dst, &dst[0], n_rows, n_per_row, weights, kernel_set
            )
    if status:
        raise MemoryError("no memory for the conversion's scratch rows")


def first_invalid_block(int type_id, const uint8_t[::1] data):
    """The index of the first block of `data` (ggml type `type_id`) holding an inf or NaN, as a
    value or a scale, or -1: what llama.cpp refuses to read or write."""
    cdef const llamay_quant_type *t = llamay_ggml_type(type_id)
    if t == NULL:
        raise ValueError(f"unknown ggml type id {type_id}")
    if data.shape[0] % t.block_bytes:
        raise ValueError(f"{data.shape[0]} bytes is not a whole number of {_name(t)} blocks")
    cdef int64_t n_blocks = data.shape[0] // t.block_bytes
    cdef int64_t found = -1
    if n_blocks:
        with nogil:
            found = llamay_first_invalid_block(type_id, &data[0], n_blocks)
    return found


cdef int _check_rows(
    const llamay_quant_type *t, Py_ssize_t n_bytes, Py_ssize_t n_rows, Py_ssize_t n_per_row
) except -1:
    if n_per_row <= 0 or n_per_row % t.block_elems:
        raise ValueError(
            f"rows of {n_per_row} elements do not split into {_name(t)} blocks "
            f"({t.block_elems} elements each)"
        )
    cdef Py_ssize_t expected = n_rows * (n_per_row // t.block_elems * t.block_bytes)
    if n_bytes != expected:
        raise ValueError(f"{n_rows} rows of {_name(t)} take {expected} bytes, got {n_bytes}")
    return 0


cdef str _quantizable():
    cdef const llamay_quant_type *t
    names = []
    for type_id in range(llamay_ggml_type_ids()):
        t = llamay_quant_type_of(type_id)
        if t != NULL and t.from_float[0] != NULL:
            names.append(_name(t))
    return ", ".join(names)
