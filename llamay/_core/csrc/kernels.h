/* The forward step's kernels besides matmul: RMS norm, gated activations, soft-caps, attention
   over KV pages, and log-sum-exp over a vocabulary.

   Each is written once (kernels_body.h) against the sixteen-lane operations of vec16.h and
   compiled once per kernel set: kernels_ref.c (plain C, the definition of every result),
   kernels_avx2.c, kernels_avx512.c and kernels_neon.c. A table per build holds its functions; every table
   gives the same bits for every input. */
#ifndef LLAMAY_KERNELS_H
#define LLAMAY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "pages.h"

/* One token's query heads of one GQA group against the KV pages of its sequence.

   Positions [first, pos] are visited, first = max(0, pos - window + 1) with a window, 0
   without: in tiles of page_tokens positions at absolute offsets (tile i holds positions
   i*P .. i*P+P-1, from page page_table[i]), with an fp32 online softmax updated once per tile.
   The tiles go in spans of llamay_attention_span_tiles(P) (span k: tiles k*S .. k*S+S-1); each
   span's softmax starts afresh, and the spans' states (max, sum, unnormalised output) are
   folded in span order, then divided by the sum. So a span can be computed by any thread, on
   its own (span_max != NULL), and folded later (attention_merge) into the same bits. The
   visited tiles and everything computed from them depend only on the query, pos, the window
   and the K/V values, so a token gives the same bits whatever batch it comes in. */
typedef struct {
    const llamay_pages *kv;
    const int32_t *page_table; /* the sequence's pages, in position order */
    int layer, kv_head;
    int n_q;    /* query heads in q and out */
    int pos;    /* the query's absolute position: it sees keys at positions <= pos */
    int window; /* sliding window, 0: none */
    float scale;   /* q.k is multiplied by it */
    float softcap; /* scores become softcap * tanh(score / softcap); 0: no cap */
    /* n_q logits, one per query head, that join the softmax's denominator with no value
       (attention sinks, gpt-oss), in the first visible span; NULL: none */
    const float *sinks;
    const float *q; /* n_q x head_dim */
    float *out;     /* n_q x head_dim (head_dim a multiple of 16, at most 1024) */
    /* NULL: every span, folded and normalised into out. Otherwise span `span` alone (one of
       llamay_attention_spans'), its unnormalised output into out and each head's max and sum
       into span_max[h] and span_sum[h] */
    float *span_max, *span_sum;
    int span;
} llamay_attention;

/* Positions a span covers at most: a whole number of tiles, so the spans' bounds are absolute
   positions fixed by the page size, never by the thread count or the batch. */
#define LLAMAY_ATTENTION_SPAN 256

static inline int llamay_attention_span_tiles(int page_tokens) {
    return LLAMAY_ATTENTION_SPAN / page_tokens;
}

/* The first position a query at pos sees. */
static inline int llamay_attention_first(int pos, int window) {
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/* The tiles [*tile0, *tile1] a query at pos sees in span `span`, or in all of its spans
   (span -1). */
static inline void llamay_attention_tiles(int pos, int window, int page_tokens, int span,
                                          int *tile0, int *tile1) {
    const int per_span = llamay_attention_span_tiles(page_tokens);
    *tile0 = llamay_attention_first(pos, window) / page_tokens;
    *tile1 = pos / page_tokens;
    if (span >= 0) {
        *tile0 = span * per_span > *tile0 ? span * per_span : *tile0;
        *tile1 = (span + 1) * per_span - 1 < *tile1 ? (span + 1) * per_span - 1 : *tile1;
    }
}

/* The spans [*first, *last] that hold the positions a query at pos sees. */
static inline void llamay_attention_spans(int pos, int window, int page_tokens, int *first,
                                          int *last) {
    const int tiles = llamay_attention_span_tiles(page_tokens);
    *first = llamay_attention_first(pos, window) / page_tokens / tiles;
    *last = pos / page_tokens / tiles;
}

/* LLAMAY_SWIGLU_OAI is gpt-oss's clamped SwiGLU (ggml_swiglu_oai with llama.cpp's alpha 1.702
   and limit 7): g = min(gate, 7), u = clamp(up, -7, 7), g / (1 + e^(-1.702 g)) * (u + 1). */
enum llamay_activation { LLAMAY_SILU = 0, LLAMAY_GELU_TANH = 1, LLAMAY_SWIGLU_OAI = 2 };

typedef struct {
    const char *name;
    int set; /* enum llamay_kernel_set: the set whose row functions (quants.h) go with these */
    /* out = x / sqrt(mean(x^2) + eps) * w (w may be NULL); out may be x */
    void (*rms_norm)(const float *x, const float *w, int n, float eps, float *out);
    /* out = (x - mean) / sqrt(mean((x - mean)^2) + eps) * w (w may be NULL); out may be x */
    void (*layer_norm)(const float *x, const float *w, int n, float eps, float *out);
    /* out = act(gate) * up, elementwise (up NULL: act(gate)); out may alias gate or up */
    void (*gated)(int activation, const float *gate, const float *up, int n, float *out);
    /* x = cap * tanh(x / cap), in place */
    void (*softcap)(float *x, int n, float cap);
    void (*attention)(const llamay_attention *a);
    /* Spans computed on their own folded in order into out (n_q x head_dim), normalised: span
       k's maxima at spans + k * stride (n_q floats), its sums after them (n_q), then its
       output (n_q x head_dim). The same bits as llamay_attention with span_max NULL. */
    void (*attention_merge)(int n_spans, int n_q, int head_dim, const float *spans,
                            size_t stride, float *out);
    /* max of x, and sum over i of e^(x[i] - max) */
    void (*logsumexp)(const float *x, int n, float *max, float *sum);
} llamay_kernels;

/* The table of a build, or NULL where it is not compiled in. */
const llamay_kernels *llamay_kernels_ref(void);
const llamay_kernels *llamay_kernels_avx2(void);
const llamay_kernels *llamay_kernels_avx512(void);
const llamay_kernels *llamay_kernels_neon(void);
/* The table of kernel set `set` (kernel_set.h), or NULL where it is not compiled in. */
const llamay_kernels *llamay_kernels_of(int set);

#endif
