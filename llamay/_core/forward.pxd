# The C structs of the forward step, declared once for Cython: csrc/forward.h and the headers
# it builds on (matmul.h, kernels.h, rope.h, weights.h). `from llamay._core.forward cimport ...`.

from libc.stdint cimport int32_t, uint8_t

from llamay._core.pages cimport llamay_pages


cdef extern from "matmul.h" nogil:
    ctypedef struct llamay_weight:
        const uint8_t *data
        int type
        int n_rows
        int n_cols
        size_t row_bytes
        size_t packed_row_bytes
        const uint8_t *packed
        int act_kind
        size_t act_row_bytes
    int llamay_weight_init(llamay_weight *w, const void *data, int type, int n_rows, int n_cols,
                           int kernel_set)

cdef extern from "kernels.h" nogil:
    enum:
        LLAMAY_SILU
        LLAMAY_GELU_TANH
        LLAMAY_SWIGLU_OAI
    ctypedef struct llamay_attention:
        const llamay_pages *kv
        const int32_t *page_table
        int layer, kv_head, n_q, pos, window
        float scale, softcap
        const float *sinks
        const float *q
        float *out
        float *span_max
        float *span_sum
        int span
    void llamay_attention_spans(int pos, int window, int page_tokens, int *first, int *last)
    ctypedef struct llamay_kernels:
        const char *name
        int set
        void (*rms_norm)(const float *x, const float *w, int n, float eps,
                         float *out) noexcept nogil
        void (*layer_norm)(const float *x, const float *w, int n, float eps,
                           float *out) noexcept nogil
        void (*gated)(int activation, const float *gate, const float *up, int n,
                      float *out) noexcept nogil
        void (*softcap)(float *x, int n, float cap) noexcept nogil
        void (*attention)(const llamay_attention *a) noexcept nogil
        void (*attention_merge)(int n_spans, int n_q, int head_dim, const float *spans,
                                size_t stride, float *out) noexcept nogil
        void (*logsumexp)(const float *x, int n, float *max, float *sum) noexcept nogil
    const llamay_kernels *llamay_kernels_of(int kernel_set)

cdef extern from "rope.h" nogil:
    int LLAMAY_ROPE_MAX_PAIRS
    ctypedef struct llamay_rope_params:
        int n_rot, neox
        double freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
        int n_ctx_orig
        const float *freq_factors
    ctypedef struct llamay_rope:
        int n_rot, neox
        double mscale
    int llamay_rope_init(llamay_rope *rope, const llamay_rope_params *params)
    void llamay_rope_cos_sin(const llamay_rope *rope, int pos, float *cos_sin)
    void llamay_rope_apply(const llamay_rope *rope, const float *cos_sin, float *x)

cdef extern from "mathfn.h" nogil:
    double llamay_log_d(double x)

cdef extern from "weights.h" nogil:
    size_t llamay_copy_bytes(const llamay_weight *w)
    uint8_t *llamay_huge_alloc(size_t n)
    void llamay_copy_weight(llamay_weight *w, uint8_t *dest, int n_threads)

cdef extern from "forward.h" nogil:
    int LLAMAY_MAX_ROPES
    int LLAMAY_MAX_EXPERTS
    enum:
        LLAMAY_QK_NORM_NONE
        LLAMAY_QK_NORM_HEAD
        LLAMAY_QK_NORM_PROJECTION
    enum:
        LLAMAY_NORM_RMS
        LLAMAY_NORM_LAYER
    enum:
        LLAMAY_GATING_SOFTMAX
        LLAMAY_GATING_SOFTMAX_WEIGHT
    ctypedef struct llamay_linear:
        llamay_weight w
        const float *bias
    ctypedef struct llamay_experts:
        llamay_weight *w
        const float *bias
    ctypedef struct llamay_moe:
        int n_expert, n_used, gating, normalize, activation
        llamay_linear router
        llamay_experts gate, up, down
        llamay_linear shared_gate
    ctypedef struct llamay_layer:
        const float *attn_norm
        llamay_linear q, k, v
        int fused_qkv
        int qk_norm
        const float *q_norm
        const float *k_norm
        llamay_linear o
        const float *post_attn_norm
        const float *ffn_norm
        int has_ffn
        llamay_linear gate, up, down
        int fused_gate_up
        const float *post_ffn_norm
        const llamay_moe *moe
        int n_head, n_head_kv, n_ff, window, rope
        float residual_scale
        int parallel
        const float *sinks
        const float *attn_out_norm
        const float *attn_out_norm_b
        const float *layer_out_norm
        const float *layer_out_norm_b
        int plain_ffn
    ctypedef struct llamay_model:
        int n_embd, n_layer, n_vocab, head_dim, activation, norm
        float norm_eps, attn_scale, attn_softcap, final_softcap, embd_scale, logit_scale
        const uint8_t *tok_embd
        int tok_embd_type
        const float *output_norm
        llamay_linear output
        int n_ropes
        llamay_rope ropes[2]
        const llamay_layer *layers
        const llamay_kernels *kernels
        int bidirectional
        const float *type_embd
        const uint8_t *pos_embd
        int pos_embd_type, n_pos
        const float *embd_norm
        const float *embd_norm_b
    ctypedef struct llamay_batch:
        int n_tokens
        const int32_t *tokens
        const int32_t *positions
        const int32_t *const *page_tables
        int n_logits
        const int32_t *logit_tokens
        float *logits
        int hidden
        const int32_t *last_positions
        const uint8_t *embd_rows
    ctypedef struct llamay_scratch:
        pass
    llamay_scratch *llamay_scratch_new(const llamay_model *m, int max_tokens)
    void llamay_scratch_free(llamay_scratch *s)
    size_t llamay_scratch_bytes(const llamay_model *m, int max_tokens)
    void llamay_forward(const llamay_model *m, const llamay_pages *kv, llamay_scratch *s,
                        const llamay_batch *b, int n_threads)


cdef inline void rope_params(llamay_rope_params *p, object rope, const float *factors):
    """p from a llamay.models.spec.Rope (factors: its freq_factors as float32, or NULL)."""
    p.n_rot = rope.n_rot
    p.neox = rope.neox
    p.freq_base = rope.freq_base
    p.freq_scale = rope.freq_scale
    p.ext_factor = rope.ext_factor
    p.attn_factor = rope.attn_factor
    p.beta_fast = rope.beta_fast
    p.beta_slow = rope.beta_slow
    p.n_ctx_orig = rope.n_ctx_orig
    p.freq_factors = factors
