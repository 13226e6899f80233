# cython: language_level=3, annotation_typing=False
"""Single kernels of the forward step, from Python: for tests, and for scoring (token_logprobs).

The engine calls these kernels from inside its one C call per step (csrc/forward.c); here each
is one call, on the kernel set a caller names ('reference', 'avx2', 'avx512', 'neon' or 'best'), so
that tests can check that every set gives the reference's bits.
"""

import numpy as np

from libc.stdint cimport int32_t

from llamay._core.forward cimport (
    LLAMAY_GELU_TANH,
    LLAMAY_SILU,
    LLAMAY_SWIGLU_OAI,
    llamay_attention,
    llamay_attention_spans,
    llamay_kernels,
    llamay_kernels_of,
    llamay_log_d,
    llamay_rope,
    llamay_rope_cos_sin,
    llamay_rope_init,
    llamay_rope_params,
    rope_params,
)
from llamay._core.kernel_sets cimport kernel_set_of, usable_kernel_sets
from llamay._core.pages cimport PageMemory, llamay_pages


def kernel_sets() -> list:
    """The kernel sets this build has and this CPU runs, slowest first ('reference' first)."""
    return usable_kernel_sets()


cdef const llamay_kernels *_kernels(str kernels) except NULL:
    return llamay_kernels_of(kernel_set_of(kernels))


# ---- scoring ----

def token_logprobs(const float[:, ::1] logits, const int32_t[::1] targets) -> np.ndarray:
    """log softmax(logits[i])[targets[i]] for every row, in float64 (max + log-sum-exp in fp32
    in a fixed order, the log in double)."""
    cdef Py_ssize_t n = logits.shape[0], v = logits.shape[1], i
    if targets.shape[0] != n:
        raise ValueError(f"{targets.shape[0]} targets for {n} rows of logits")
    for i in range(n):
        if not 0 <= targets[i] < v:
            raise ValueError(f"target {targets[i]} is out of range for {v} logits")
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    cdef const llamay_kernels *k = _kernels("best")
    cdef float mx, total
    with nogil:
        for i in range(n):
            k.logsumexp(&logits[i, 0], <int>v, &mx, &total)
            o[i] = (<double>logits[i, targets[i]] - mx) - llamay_log_d(total)
    return out


# ---- single kernels, for tests ----

ACTIVATIONS = {"silu": LLAMAY_SILU, "gelu_tanh": LLAMAY_GELU_TANH, "swiglu_oai": LLAMAY_SWIGLU_OAI}


cdef object _norm(bint layer, const float[::1] x, object weight, float eps, str kernels):
    cdef const llamay_kernels *k = _kernels(kernels)
    cdef const float[::1] w
    cdef const float *w_ptr = NULL
    if weight is not None:
        w = weight
        w_ptr = &w[0]
    out = np.empty(x.shape[0], dtype=np.float32)
    cdef float[::1] o = out
    (k.layer_norm if layer else k.rms_norm)(&x[0], w_ptr, <int>x.shape[0], eps, &o[0])
    return out


def rms_norm(const float[::1] x, weight, float eps, str kernels="best") -> np.ndarray:
    return _norm(False, x, weight, eps, kernels)


def layer_norm(const float[::1] x, weight, float eps, str kernels="best") -> np.ndarray:
    """Cohere's LayerNorm without bias (weight may be None)."""
    return _norm(True, x, weight, eps, kernels)


def gated(str activation, const float[::1] gate, const float[::1] up, str kernels="best"):
    """act(gate) * up for activation 'silu', 'gelu_tanh' or 'swiglu_oai'."""
    cdef const llamay_kernels *k = _kernels(kernels)
    cdef int act = ACTIVATIONS[activation]
    out = np.empty(gate.shape[0], dtype=np.float32)
    cdef float[::1] o = out
    k.gated(act, &gate[0], &up[0], <int>gate.shape[0], &o[0])
    return out


def softcap(const float[::1] x, float cap, str kernels="best") -> np.ndarray:
    cdef const llamay_kernels *k = _kernels(kernels)
    out = np.array(x, dtype=np.float32)
    cdef float[::1] o = out
    k.softcap(&o[0], <int>o.shape[0], cap)
    return out


def logsumexp(const float[::1] x, str kernels="best") -> tuple:
    """(max, sum of e^(x - max)), in fp32."""
    cdef const llamay_kernels *k = _kernels(kernels)
    cdef float mx, total
    k.logsumexp(&x[0], <int>x.shape[0], &mx, &total)
    return mx, total


def attention(PageMemory memory not None, const int32_t[::1] page_table, int layer, int kv_head,
              const float[:, ::1] q, int pos, int window=0, float scale=1.0, float softcap=0.0,
              str kernels="best", sinks=None, bint by_spans=False) -> np.ndarray:
    """Query heads q (n_q, head_dim) at position pos against one KV head of the pages; sinks:
    one logit per query head in the softmax's denominator (or None). by_spans: each span of
    positions computed on its own, then merged, as a step split by spans does (the same bits)."""
    cdef const llamay_kernels *k = _kernels(kernels)
    cdef const float[::1] sink_view
    cdef llamay_attention a
    cdef const llamay_pages *kv = &memory.c
    cdef Py_ssize_t i
    cdef int first_span, last_span, n_q = <int>q.shape[0]
    if q.shape[1] != kv.head_dim or kv.head_dim % 16 or kv.head_dim > 1024:
        raise ValueError(
            f"q rows must have head_dim = {kv.head_dim} (a multiple of 16, at most 1024)"
        )
    if not (0 <= layer < kv.n_layers and 0 <= kv_head < kv.n_kv_heads):
        raise ValueError("layer or kv_head out of range")
    if pos < 0 or pos // kv.page_tokens >= page_table.shape[0]:
        raise ValueError(f"position {pos} has no page")
    for i in range(page_table.shape[0]):
        if not 0 <= page_table[i] < kv.n_pages:
            raise ValueError(f"page {page_table[i]} of a page table is out of range")
    out = np.empty((q.shape[0], q.shape[1]), dtype=np.float32)
    cdef float[:, ::1] o = out
    a.kv = kv
    a.page_table = &page_table[0]
    a.layer = layer
    a.kv_head = kv_head
    a.n_q = n_q
    a.pos = pos
    a.window = window
    a.scale = scale
    a.softcap = softcap
    a.sinks = NULL
    if sinks is not None:
        sink_view = np.ascontiguousarray(sinks, dtype=np.float32)
        if sink_view.shape[0] != q.shape[0]:
            raise ValueError(f"{sink_view.shape[0]} sinks for {q.shape[0]} query heads")
        a.sinks = &sink_view[0]
    a.q = &q[0, 0]
    a.span_max = a.span_sum = NULL
    a.span = 0
    if not by_spans:
        a.out = &o[0, 0]
        k.attention(&a)
        return out
    # one state per span, laid out as attention_merge reads it: maxima, sums, outputs
    llamay_attention_spans(pos, window, kv.page_tokens, &first_span, &last_span)
    cdef Py_ssize_t stride = n_q * (kv.head_dim + 2)
    states = np.empty((last_span - first_span + 1, stride), dtype=np.float32)
    cdef float[:, ::1] st = states
    for i in range(states.shape[0]):
        a.span = first_span + <int>i
        a.span_max = &st[i, 0]
        a.span_sum = &st[i, n_q]
        a.out = &st[i, 2 * n_q]
        k.attention(&a)
    k.attention_merge(<int>states.shape[0], n_q, kv.head_dim, &st[0, 0], stride, &o[0, 0])
    return out


def rope_cos_sin(rope, const int32_t[::1] positions) -> np.ndarray:
    """(cos, sin) pairs of a llamay.models.spec.Rope at each position: (n, n_rot) float32."""
    cdef llamay_rope r
    cdef llamay_rope_params p
    cdef const float[::1] factors
    if rope.freq_factors is not None:
        factors = np.ascontiguousarray(rope.freq_factors, dtype=np.float32)
        rope_params(&p, rope, &factors[0])
    else:
        rope_params(&p, rope, NULL)
    if llamay_rope_init(&r, &p) != 0:
        raise ValueError(f"RoPE over {rope.n_rot} dimensions is not supported")
    out = np.empty((positions.shape[0], rope.n_rot), dtype=np.float32)
    cdef float[:, ::1] o = out
    cdef Py_ssize_t i
    for i in range(positions.shape[0]):
        llamay_rope_cos_sin(&r, positions[i], &o[i, 0])
    return out
