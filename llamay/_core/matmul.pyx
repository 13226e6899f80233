# cython: language_level=3, annotation_typing=False
"""Quantized matrix multiplication, from Python: for tests, benchmarks and debugging.

The engine calls the C functions of csrc/matmul.h from inside its own parallel region; this
module wraps the same kernels, one call per product, and lets a caller pick the kernel set to
check that every set gives the same bits.
"""

import time

import numpy as np

from libc.stdint cimport uint8_t
from libc.stdlib cimport calloc, free
from posix.mman cimport MADV_HUGEPAGE, madvise

from llamay._core.kernel_sets cimport usable_kernel_sets, kernel_set_names, kernel_set_of
from llamay._core.quants cimport llamay_ggml_type, llamay_quant_type

from llamay.errors import UnsupportedModel

cdef extern from "stdlib.h" nogil:
    void *aligned_alloc(size_t alignment, size_t size)

cdef extern from "matmul.h" nogil:
    ctypedef struct llamay_weight:
        int n_rows
        size_t row_bytes
        size_t packed_row_bytes
        const uint8_t *packed
        size_t act_row_bytes
    ctypedef struct llamay_matmul_job:
        const llamay_weight *w
        const float *x
        uint8_t *act
        float *out
    int llamay_kernel_set_has_simd(int kernel_set, int type)
    int llamay_weight_init(llamay_weight *w, const void *data, int type, int n_rows, int n_cols,
                           int kernel_set)
    void llamay_weight_pack(const llamay_weight *w, uint8_t *packed, int row_begin, int row_end)
    size_t llamay_packed_bytes(const llamay_weight *w)
    void llamay_matmul_parallel(const llamay_matmul_job *jobs, int n_jobs, int n_tokens,
                                int repeats, int n_threads)
    int llamay_barrier_check(int n_threads, int rounds, int sleep_every)

def kernel_sets() -> list:
    """The kernel sets this build has and this CPU runs, slowest first ('reference' first)."""
    return usable_kernel_sets()


def best_kernel_set() -> str:
    """The kernel set the engine uses."""
    return kernel_set_names()[kernel_set_of("best")]


def has_simd(str kernels, int w_type) -> bool:
    """Whether `kernels` has its own kernel for w_type (else it runs the reference: same bits)."""
    return bool(llamay_kernel_set_has_simd(kernel_set_of(kernels), w_type))


cdef int _weight(llamay_weight *w, const uint8_t[::1] w_bytes, int w_type, int n_rows,
                 int n_cols, str kernels) except -1:
    """Fills w for the matrix in w_bytes, or raises."""
    cdef int kernel_set = kernel_set_of(kernels)  # raises for a set that does not run here
    cdef const llamay_quant_type *t = llamay_ggml_type(w_type)
    status = llamay_weight_init(w, &w_bytes[0] if w_bytes.shape[0] else NULL, w_type, n_rows,
                                n_cols, kernel_set)
    name = t.name.decode("ascii") if t != NULL else f"type {w_type}"
    if status != 0:
        raise UnsupportedModel(
            f"no matmul for {name} weights of {n_cols} columns (a type llamay multiplies, "
            "with rows a whole number of blocks, is needed)"
        )
    if <size_t>w_bytes.shape[0] != w.row_bytes * <size_t>n_rows:
        raise ValueError(
            f"{n_rows} rows of {n_cols} {name} elements take {w.row_bytes * n_rows} bytes, "
            f"not {w_bytes.shape[0]}"
        )
    return 0


HUGE_PAGE = 2 << 20


cdef int _pack(llamay_weight *w) except -1:
    """Gives w the packed copy its kernels read, where they read one (free w.packed after).

    The copy goes into 2 MiB pages, as the engine places the weights it repacks: decode streams
    them, and huge pages raise the bandwidth a core gets.
    """
    if w.packed_row_bytes == 0:
        return 0
    cdef size_t size = (llamay_packed_bytes(w) + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE
    cdef uint8_t *packed = <uint8_t *>aligned_alloc(HUGE_PAGE, size)
    if packed == NULL:
        raise MemoryError()
    madvise(packed, size, MADV_HUGEPAGE)  # advice only: failure changes nothing but speed
    with nogil:
        llamay_weight_pack(w, packed, 0, w.n_rows)
    w.packed = packed
    return 0


def barrier_check(int threads, int rounds, int sleep_every=0) -> int:
    """For tests: the forward step's barrier passed `rounds` times by `threads` threads (matmul.h:
    llamay_barrier_check); the slots read out of turn, 0 where it holds."""
    if not 1 <= threads <= 256 or rounds < 0 or sleep_every < 0:
        raise ValueError("barrier_check needs 1 <= threads <= 256 and rounds, sleep_every >= 0")
    cdef int wrong
    with nogil:
        wrong = llamay_barrier_check(threads, rounds, sleep_every)
    return wrong


def _check_threads(int threads):
    if threads < 0:
        raise ValueError(f"threads must be >= 0 (0: one per CPU), not {threads}")


def matmul(const uint8_t[::1] w_bytes, int w_type, int n_rows, int n_cols,
           const float[:, ::1] x, int threads=0, str kernels="best"):
    """out[t, r] = dot(row r of the weight matrix, x[t]): float32 of shape (len(x), n_rows).

    w_bytes holds n_rows rows of n_cols elements of ggml type w_type (a GGUF tensor's data, as
    laid out in the file). kernels is 'best' or one of kernel_sets(); every set gives the same
    bits, and so does every threads count.
    """
    cdef llamay_weight w
    cdef llamay_matmul_job job
    _weight(&w, w_bytes, w_type, n_rows, n_cols, kernels)
    if x.shape[1] != n_cols:
        raise ValueError(f"x has {x.shape[1]} columns; the weight matrix has {n_cols}")
    _check_threads(threads)

    cdef int n_tokens = x.shape[0]
    out = np.zeros((n_tokens, n_rows), dtype=np.float32)
    cdef float[:, ::1] out_view = out
    if n_tokens == 0 or n_rows == 0:
        return out
    job.w = &w
    job.x = &x[0, 0]
    job.out = &out_view[0, 0]
    job.act = NULL
    try:
        _pack(&w)
        job.act = <uint8_t *>aligned_alloc(64, w.act_row_bytes * n_tokens)
        if job.act == NULL:
            raise MemoryError()
        with nogil:
            llamay_matmul_parallel(&job, 1, n_tokens, 1, threads)
    finally:
        free(job.act)
        free(<void *>w.packed)
    return out


def time_matmuls(list products, int n_tokens, int threads=0, int repeats=10,
                 str kernels="best") -> float:
    """Seconds per pass of a forward step's worth of products, run as the engine runs them.

    products: (w_bytes, w_type, n_rows, n_cols) tuples, multiplied one after another (each
    against its own random activations of n_tokens rows) in one parallel region, `repeats` times
    after one pass to warm up; activation quantization is included.
    """
    _check_threads(threads)
    cdef int n = len(products), i
    if n == 0 or n_tokens <= 0 or repeats <= 0:
        raise ValueError("time_matmuls needs products, n_tokens > 0 and repeats > 0")
    cdef llamay_weight *weights = <llamay_weight *>calloc(n, sizeof(llamay_weight))
    cdef llamay_matmul_job *jobs = <llamay_matmul_job *>calloc(n, sizeof(llamay_matmul_job))
    cdef float[:, ::1] x_view, out_view
    keep = []
    rng = np.random.default_rng(0)
    try:
        if weights == NULL or jobs == NULL:
            raise MemoryError()
        for i in range(n):
            w_bytes, w_type, n_rows, n_cols = products[i]
            _weight(&weights[i], w_bytes, w_type, n_rows, n_cols, kernels)
            _pack(&weights[i])
            x = rng.standard_normal((n_tokens, n_cols), dtype=np.float32)
            out = np.empty((n_tokens, n_rows), dtype=np.float32)
            keep += [w_bytes, x, out]
            x_view, out_view = x, out
            jobs[i].w = &weights[i]
            jobs[i].x = &x_view[0, 0]
            jobs[i].out = &out_view[0, 0]
            jobs[i].act = <uint8_t *>aligned_alloc(64, weights[i].act_row_bytes * n_tokens)
            if jobs[i].act == NULL:
                raise MemoryError()
        with nogil:
            llamay_matmul_parallel(jobs, n, n_tokens, 1, threads)
        start = time.perf_counter()
        with nogil:
            llamay_matmul_parallel(jobs, n, n_tokens, repeats, threads)
        return (time.perf_counter() - start) / repeats
    finally:
        for i in range(n if jobs != NULL and weights != NULL else 0):
            free(jobs[i].act)
            free(<void *>weights[i].packed)
        free(jobs)
        free(weights)
