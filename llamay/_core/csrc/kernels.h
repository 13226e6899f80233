/* The forward step's kernels besides matmul: RMS norm, gated activations, soft-caps, attention
   over KV pages, and log-sum-exp over a vocabulary.

   Each is written once (kernels_body.h) against the sixteen-lane operations of vec16.h and
   compiled three times: kernels_ref.c (plain C, the definition of every result),
   kernels_avx2.c and kernels_avx512.c. A table per build holds its functions; every table
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
   The visited tiles and everything computed from them depend only on the query, pos, the
   window and the K/V values, so a token gives the same bits whatever batch it comes in. */
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
       (attention sinks, gpt-oss); NULL: none */
    const float *sinks;
    const float *q; /* n_q x head_dim */
    float *out;     /* n_q x head_dim */
} llamay_attention;

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
    /* max of x, and sum over i of e^(x[i] - max) */
    void (*logsumexp)(const float *x, int n, float *max, float *sum);
} llamay_kernels;

/* The table of a build, or NULL where it is not compiled in. */
const llamay_kernels *llamay_kernels_ref(void);
const llamay_kernels *llamay_kernels_avx2(void);
const llamay_kernels *llamay_kernels_avx512(void);

#endif
