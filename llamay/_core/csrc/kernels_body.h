/* The kernels of kernels.h, written once against vec16.h. Included by kernels_ref.c,
   kernels_avx2.c, kernels_avx512.c and kernels_neon.c after vec16.h, with KERNELS_TABLE naming
   the function that returns the build's table and KERNELS_SET its kernel set. Everything here
   is `static`: each build has its own copy. */
#include <stddef.h>

#include "fp16.h"
#include "kernel_set.h"
#include "kernels.h"
#include "pages.h"
#include "prefetch.h"

/* ---- RMS norm (ggml_rms_norm, then the weight) ---- */

static void rms_norm(const float *x, const float *w, int n, float eps, float *out) {
    v16 acc = v16_zero();
    for (int i = 0; i < n; i += 16) {
        const v16 v = v16_load_partial(x + i, n - i < 16 ? n - i : 16);
        acc = v16_fma(v, v, acc);
    }
    const float mean = v16_tree(acc) / (float)n;
    const v16 scale = v16_set1(1.0f / sqrtf(mean + eps));
    for (int i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? n - i : 16;
        v16 y = v16_mul(v16_load_partial(x + i, m), scale);
        if (w != NULL) {
            y = v16_mul(y, v16_load_partial(w + i, m));
        }
        v16_store_partial(out + i, y, m);
    }
}

/* ---- LayerNorm without bias (ggml_norm, then the weight; Cohere) ---- */

static void layer_norm(const float *x, const float *w, int n, float eps, float *out) {
    v16 acc = v16_zero();
    for (int i = 0; i < n; i += 16) {
        acc = v16_add(acc, v16_load_partial(x + i, n - i < 16 ? n - i : 16));
    }
    const v16 mean = v16_set1(v16_tree(acc) / (float)n);
    /* the centred values go to out first (x is not read again), and are read back with zeros
       past n, so that the tail's lanes add nothing to the variance */
    acc = v16_zero();
    for (int i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? n - i : 16;
        v16_store_partial(out + i, v16_sub(v16_load_partial(x + i, m), mean), m);
        const v16 c = v16_load_partial(out + i, m);
        acc = v16_fma(c, c, acc);
    }
    const v16 scale = v16_set1(1.0f / sqrtf(v16_tree(acc) / (float)n + eps));
    for (int i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? n - i : 16;
        v16 y = v16_mul(v16_load_partial(out + i, m), scale);
        if (w != NULL) {
            y = v16_mul(y, v16_load_partial(w + i, m));
        }
        v16_store_partial(out + i, y, m);
    }
}

/* ---- gated activations ---- */

/* ggml_gelu's tanh form: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) */
static inline v16 gelu_tanh(v16 x) {
    const v16 inner = v16_mul(v16_mul(v16_set1(0.79788456080286535588f), x),
                              v16_add(v16_set1(1.0f),
                                      v16_mul(v16_mul(v16_set1(0.044715f), x), x)));
    return v16_mul(v16_mul(v16_set1(0.5f), x), v16_add(v16_set1(1.0f), v16_tanh(inner)));
}

/* ggml_silu: x / (1 + e^-x) */
static inline v16 silu(v16 x) {
    return v16_div(x, v16_add(v16_set1(1.0f), v16_exp(v16_sub(v16_zero(), x))));
}

/* ggml_swiglu_oai: x = min(gate, limit), y = clamp(up, -limit, limit),
   x / (1 + e^(alpha * -x)) * (y + 1) */
static inline v16 swiglu_oai(v16 gate, v16 up) {
    const v16 limit = v16_set1(7.0f);
    const v16 x = v16_min(gate, limit);
    const v16 y = v16_max(v16_min(up, limit), v16_sub(v16_zero(), limit));
    const v16 glu = v16_div(
        x, v16_add(v16_set1(1.0f), v16_exp(v16_mul(v16_set1(1.702f), v16_sub(v16_zero(), x)))));
    return v16_mul(glu, v16_add(y, v16_set1(1.0f)));
}

/* ggml_gelu as ggml's CPU path computes it (GGML_GELU_FP16: BERT's plain FFN): x rounded to
   fp16 and looked up in a table of fp16 results of the tanh form; 0 at or below -10, x at or
   above 10. out may be x. */
static void gelu_fp16(const float *x, int n, float *out) {
    float h[16];
    for (int i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? n - i : 16;
        for (int j = 0; j < 16; j++) {
            h[j] = j < m ? llamay_fp16_to_fp32(llamay_fp32_to_fp16(x[i + j])) : 0.0f;
        }
        v16_store_partial(h, gelu_tanh(v16_load_partial(h, 16)), 16);
        for (int j = 0; j < m; j++) {
            const float xi = x[i + j];
            const float table = llamay_fp16_to_fp32(llamay_fp32_to_fp16(h[j]));
            out[i + j] = xi <= -10.0f ? 0.0f : xi >= 10.0f ? xi : table;
        }
    }
}

static void gated(int activation, const float *gate, const float *up, int n, float *out) {
    if (up == NULL && activation == LLAMAY_GELU_TANH) {
        gelu_fp16(gate, n, out);
        return;
    }
    for (int i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? n - i : 16;
        const v16 g = v16_load_partial(gate + i, m);
        v16 y;
        if (up == NULL) { /* a plain FFN's act(x) (BERT's GELU) */
            v16_store_partial(out + i, activation == LLAMAY_GELU_TANH ? gelu_tanh(g) : silu(g), m);
            continue;
        }
        const v16 u = v16_load_partial(up + i, m);
        if (activation == LLAMAY_SWIGLU_OAI) {
            y = swiglu_oai(g, u);
        } else {
            y = v16_mul(activation == LLAMAY_GELU_TANH ? gelu_tanh(g) : silu(g), u);
        }
        v16_store_partial(out + i, y, m);
    }
}

/* ---- soft-cap (Gemma 2): scale by 1/cap, tanh, scale by cap, as ggml does ---- */

static void softcap(float *x, int n, float cap) {
    const v16 inv = v16_set1(1.0f / cap), c = v16_set1(cap);
    for (int i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? n - i : 16;
        v16_store_partial(x + i, v16_mul(v16_tanh(v16_mul(v16_load_partial(x + i, m), inv)), c),
                          m);
    }
}

/* ---- attention over KV pages ---- */

/* Elements d .. d+15 of row j of a K or V block of KV type `type` (llamay_kv_type), as fp32. A
   Q8_0 value q * d is exact in fp32 (8 by 11 significant bits), so every kernel set reads the
   same numbers. The callers pass a constant type: one branch of the switch is compiled. */
V16_INLINE v16 kv_load(const int type, const unsigned char *rows, int64_t row_bytes, int j,
                       int d) {
    const unsigned char *row = rows + (size_t)j * row_bytes;
    switch (type) {
    case LLAMAY_KV_F32: return v16_load((const float *)row + d);
    case LLAMAY_KV_F16: return v16_load_f16((const uint16_t *)row + d);
    default: { /* LLAMAY_KV_Q8_0 */
        const unsigned char *block = row + (size_t)(d / 32) * 34;
        uint16_t scale;
        memcpy(&scale, block, sizeof scale);
        return v16_mul(v16_load_i8((const int8_t *)block + 2 + d % 32),
                       v16_set1(llamay_fp16_to_fp32(scale)));
    }
    }
}

/* Row `row` of the next page's K block, asked for line by line: the score loop asks for the
   rows it scores, so that the next page's K arrives over the whole loop. Into L2, and into L1
   where the L1 requests name the far lines (prefetch.h). */
static inline void ask_next_row(const unsigned char *next_K, int64_t row_bytes, int row) {
    const unsigned char *ask = next_K + (size_t)row * row_bytes;
    llamay_prefetch_lines(ask, llamay_prefetch_l1_target(ask), (size_t)row_bytes);
}

/* x where lane j + i lies in j0 .. j1 - 1, `outside` elsewhere */
static inline v16 visible_lanes(v16 x, int j, int j0, int j1, float outside) {
    if (j >= j0 && j + 16 <= j1) {
        return x; /* every lane: the whole of a tile in the middle of the context */
    }
    static const float lane[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const v16 at = v16_add(v16_load(lane), v16_set1((float)j));
    x = v16_select(v16_lt(at, v16_set1((float)j0)), v16_set1(outside), x);
    return v16_select(v16_lt(at, v16_set1((float)j1)), x, v16_set1(outside));
}

/* How many 16-element chunks of each head's output the V loop keeps in registers, and the
   largest group of query heads a call takes: a set with 16 vector registers (AVX2) spills with
   more. Neither changes a result: each output element is summed in position order whatever the
   chunking, and each head's result is the same in any group. */
#ifndef ATTENTION_V_CHUNKS
#define ATTENTION_V_CHUNKS 2
#endif
#ifndef ATTENTION_MAX_GROUP
#define ATTENTION_MAX_GROUP 8
#endif

/* The score rows of a group of heads: a page's positions, and 8 slots past them for the rows
   past j1 that a block of eight scores */
#define SCORE_ROW (64 + 8)

#if LLAMAY_VEC == LLAMAY_VEC_AVX2
/* AVX2 has sixteen vector registers, eight v16s: two rows by two heads of score accumulators
   and their operands fill them, one load per FMA. But a lane's chain meets no other lane before
   the tree's first step (lane i + lane i + 8), so the scores are computed here eight lanes at a
   time: R rows by `heads` heads (R x heads = 8 accumulators), each K half converted once for
   every head (by kv_load, whose other half the compiler drops) and each q half loaded once for
   every row. The same chains, so the same bits.

   Rows jb .. jb + 7's scores for `heads` (1 to 4, a constant) query heads into s[h][jb ..],
   rows past j1 - 1 read as row j1 - 1 (their scores land past j1, where nothing reads them); the
   same rows of the next page's K block (next_K, NULL: none) asked for R at a time. */
V16_INLINE void score_rows8(const int type, const int heads, const float *q,
                            const unsigned char *K, const unsigned char *next_K,
                            int64_t row_bytes, int jb, int j1, int D, float scale,
                            float (*s)[SCORE_ROW]) {
    const int R = 8 / heads;
    __m256 h[4][8];
    for (int r0 = 0; r0 < 8; r0 += R) {
        int row[8];
        for (int r = 0; r < R; r++) row[r] = jb + r0 + r < j1 ? jb + r0 + r : j1 - 1;
        for (int r = 0; r < R && next_K != NULL && jb + r0 + r < j1; r++) {
            ask_next_row(next_K, row_bytes, jb + r0 + r);
        }
        for (int half = 0; half < 2; half++) {
            __m256 acc[8][4];
            for (int r = 0; r < R; r++) {
                for (int i = 0; i < heads; i++) acc[r][i] = _mm256_setzero_ps();
            }
            for (int d = 0; d < D; d += 16) {
                __m256 k[8];
                for (int r = 0; r < R; r++) {
                    const v16 row_k = kv_load(type, K, row_bytes, row[r], d);
                    k[r] = half ? row_k.hi : row_k.lo; /* the other half's conversion is dead */
                }
                for (int i = 0; i < heads; i++) {
                    __m256 x = _mm256_loadu_ps(q + (size_t)i * D + d + 8 * half);
                    /* in a register for the R FMAs: compilers fold a load into each */
                    __asm__("" : "+x"(x));
                    for (int r = 0; r < R; r++) acc[r][i] = _mm256_fmadd_ps(x, k[r], acc[r][i]);
                }
            }
            for (int r = 0; r < R; r++) {
                for (int i = 0; i < heads; i++) {
                    /* the lo half's sum, then lo + hi */
                    h[i][r0 + r] = half ? _mm256_add_ps(h[i][r0 + r], acc[r][i]) : acc[r][i];
                }
            }
        }
    }
    for (int i = 0; i < heads; i++) v16_tree8_halves(h[i], scale, s[i] + jb);
}
#else
/* Rows jb .. jb + 7's scores for `heads` (a constant) query heads into s[h][jb ..], two rows at
   a time: rows r and r + 4, whose first tree step (v16_tree8_first) is taken as soon as they
   are scored, so that on AVX-512 a head holds four vectors for the rest of its tree, not eight
   (four heads' eight rows would not fit in 32 registers, and went through memory). Each K chunk
   converted once, in a register, for every head; rows past j1 - 1 read as row j1 - 1 (their
   trees land past j1). Each score is v16_tree(its lane sums) * scale. */
V16_INLINE void score_rows8(const int type, const int heads, const float *q,
                            const unsigned char *K, const unsigned char *next_K,
                            int64_t row_bytes, int jb, int j1, int D, float scale,
                            float (*s)[SCORE_ROW]) {
    v16_tree_pair u[ATTENTION_MAX_GROUP][4];
#pragma GCC unroll 4 /* u in registers */
    for (int r = 0; r < 4; r++) {
        const int r0 = jb + r < j1 ? jb + r : j1 - 1;
        const int r1 = jb + r + 4 < j1 ? jb + r + 4 : j1 - 1;
        if (next_K != NULL && jb + r < j1) ask_next_row(next_K, row_bytes, jb + r);
        if (next_K != NULL && jb + r + 4 < j1) ask_next_row(next_K, row_bytes, jb + r + 4);
        v16 acc[ATTENTION_MAX_GROUP][2];
        for (int h = 0; h < heads; h++) acc[h][0] = acc[h][1] = v16_zero();
        for (int d = 0; d < D; d += 16) {
            const v16 k0 = kv_load(type, K, row_bytes, r0, d);
            const v16 k1 = kv_load(type, K, row_bytes, r1, d);
            for (int h = 0; h < heads; h++) {
                const v16 x = v16_load(q + (size_t)h * D + d);
                acc[h][0] = v16_fma(x, k0, acc[h][0]);
                acc[h][1] = v16_fma(x, k1, acc[h][1]);
            }
        }
        for (int h = 0; h < heads; h++) u[h][r] = v16_tree8_first(acc[h][0], acc[h][1]);
    }
    for (int h = 0; h < heads; h++) v16_tree8_rest(u[h], scale, s[h] + jb);
}
#endif

/* Tiles tile0 .. tile1 (all visible) of `heads` query heads (a constant, so that the
   accumulators live in registers), from a fresh softmax (or the sinks): each head's max into
   m, sum into l, unnormalised output into out. K/V rows of KV type `type` (a constant: fp32,
   fp16 or Q8_0, read by kv_load); head_dim a multiple of 16; page_tokens a multiple of 16, at
   most 64. Scores come eight rows at a time from score_rows8. A page can lie anywhere (pages
   freed and taken again: csrc/pages.h), where the prefetchers cannot guess it: the page after
   next has its K rows asked for by score_rows8 as it scores the same rows, its V block a line
   or part of one at each step of the V loop, so that memory stays busy through the whole tile
   instead of in bursts that fill the line-fill buffers and stall (asking for K and V during the
   scores alone left the arithmetic and the memory taking turns: the time a step was their
   sum). */
V16_INLINE void attention_tiles(const int type, const int heads, const llamay_attention *a,
                                const float *q, const float *sinks, int tile0, int tile1,
                                float *m, float *l, float *out) {
    const llamay_pages *kv = a->kv;
    const int D = kv->head_dim, P = kv->page_tokens;
    const int first = llamay_attention_first(a->pos, a->window);
    float alpha[16];
    float s[ATTENTION_MAX_GROUP][SCORE_ROW];
    memset(s, 0, (size_t)heads * sizeof s[0]);
    for (int h = 0; h < heads; h++) {
        /* a sink is a score seen before any key: e^(sink - m) of it stays in the sum */
        m[h] = sinks != NULL ? sinks[h] : -INFINITY;
        l[h] = sinks != NULL ? 1.0f : 0.0f;
        memset(out + (size_t)h * D, 0, (size_t)D * sizeof(float));
    }
    for (int tile = tile0; tile <= tile1; tile++) {
        const int32_t page = a->page_table[tile];
        const unsigned char *K = llamay_page_k(kv, page, a->layer, a->kv_head);
        const unsigned char *V = llamay_page_v(kv, page, a->layer, a->kv_head);
        const unsigned char *next_K = NULL, *next_V = NULL;
        if (tile < a->pos / P) {
            /* the page after next where there is one: the next was asked for a tile ago, but
               at a span's first tile only the prefetchers fetch it, where it is this block's
               neighbour in a run (csrc/pages.h) */
            const int32_t next = a->page_table[tile + 1 < a->pos / P ? tile + 2 : tile + 1];
            next_K = llamay_page_k(kv, next, a->layer, a->kv_head);
            next_V = llamay_page_v(kv, next, a->layer, a->kv_head);
        }
        const int base = tile * P;
        const int j0 = first > base ? first - base : 0;
        const int j1 = a->pos - base + 1 < P ? a->pos - base + 1 : P;
        /* scores q.k * scale, soft-capped: lane sums over the chunks of 16 in order, then the
           lanes' tree; eight rows at a time, so that eight trees are summed side by side */
        for (int jb = j0; jb < j1; jb += 8) {
            score_rows8(type, heads, q, K, next_K, kv->row_bytes, jb, j1, D, a->scale, s);
        }
        /* the online softmax: rescale what came before by alpha = e^(m_old - m_new), 0 while
           nothing came before (e^-inf is 0), every head's from one v16_exp (lane-wise, so the
           same bits in any group); the tile's probabilities are summed chunk by chunk in lanes,
           then by the lanes' tree (lanes outside j0 .. j1 - 1 count for neither the max nor the
           sum) */
        float shift[16] = {0};
        for (int h = 0; h < heads; h++) {
            if (a->softcap != 0.0f) {
                softcap(s[h], P, a->softcap);
            }
            v16 top = v16_set1(-INFINITY);
            for (int j = 0; j < P; j += 16) {
                top = v16_max(top, visible_lanes(v16_load(s[h] + j), j, j0, j1, -INFINITY));
            }
            const float tile_max = v16_hmax(top);
            const float m_new = tile_max > m[h] ? tile_max : m[h];
            shift[h] = m[h] == -INFINITY ? -INFINITY : m[h] - m_new;
            m[h] = m_new;
        }
        v16_store(alpha, v16_exp(v16_load(shift)));
        for (int h = 0; h < heads; h++) {
            const float m_new = m[h];
            v16 total = v16_zero();
            for (int j = 0; j < P; j += 16) {
                const v16 p = v16_exp(v16_sub(v16_load(s[h] + j), v16_set1(m_new)));
                v16_store(s[h] + j, p);
                total = v16_add(total, visible_lanes(p, j, j0, j1, 0.0f));
            }
            l[h] = l[h] * alpha[h] + v16_tree(total);
        }
        /* out = out * alpha + sum_j p_j v_j, each element in position order (chunks of 16,
           ATTENTION_V_CHUNKS at a time: independent chains) */
        enum { CHUNKS = ATTENTION_V_CHUNKS };
        /* the next page's V block over the V loop's steps (where there is no next page, this
           one's again: no branch in the loop) */
        const int passes = (D + 16 * CHUNKS - 1) / (16 * CHUNKS);
        const unsigned char *ask = next_V != NULL ? next_V : V;
        const int64_t ask_step = kv->head_bytes / (passes * P);
        /* the L1 request's line: the same one, or the idle lines each time (prefetch.h) */
        const unsigned char *near = llamay_prefetch_l1_target(ask);
        const int64_t near_step = near == ask ? ask_step : 0;
        const int64_t row_bytes = kv->row_bytes;
        for (int d = 0; d < D; d += 16 * CHUNKS) {
            v16 o[ATTENTION_MAX_GROUP][CHUNKS];
            for (int h = 0; h < heads; h++) {
                for (int c = 0; c < CHUNKS; c++) {
                    o[h][c] = v16_zero(); /* unused past D */
                    if (d + 16 * c < D) {
                        o[h][c] = v16_mul(v16_load(out + (size_t)h * D + d + 16 * c),
                                          v16_set1(alpha[h]));
                    }
                }
            }
            const unsigned char *row = V + (size_t)j0 * (size_t)row_bytes;
            for (int j = j0; j < j1; j++, row += row_bytes) {
                llamay_prefetch_lines(ask, near, 1); /* one line */
                ask += ask_step;
                near += near_step;
                for (int c = 0; c < CHUNKS && d + 16 * c < D; c++) {
                    const v16 v = kv_load(type, row, 0, 0, d + 16 * c);
                    for (int h = 0; h < heads; h++) {
                        o[h][c] = v16_fma(v16_set1(s[h][j]), v, o[h][c]);
                    }
                }
            }
            for (int h = 0; h < heads; h++) {
                for (int c = 0; c < CHUNKS && d + 16 * c < D; c++) {
                    v16_store(out + (size_t)h * D + d + 16 * c, o[h][c]);
                }
            }
        }
    }
}

/* attention_tiles for each KV type and group size, a function each (a profile names them): in
   functions that held several of them, the same loops ran slower. Every group size up to
   ATTENTION_MAX_GROUP (4 or 8), so that a KV head's query heads (3 in SmolLM2, 6 or 7 in
   Qwen2.5) read its pages once, not once for each power of two. */
#define ATTENTION_GROUP(type, TYPE, heads)                                                         \
    static void attention_##type##_##heads(const llamay_attention *a, const float *q,              \
                                           const float *sinks, int tile0, int tile1, float *m,     \
                                           float *l, float *out) {                                 \
        attention_tiles(LLAMAY_KV_##TYPE, heads, a, q, sinks, tile0, tile1, m, l, out);            \
    }
#if ATTENTION_MAX_GROUP > 4
#define ATTENTION_GROUPS(type, TYPE)                                                               \
    ATTENTION_GROUP(type, TYPE, 1) ATTENTION_GROUP(type, TYPE, 2) ATTENTION_GROUP(type, TYPE, 3)   \
    ATTENTION_GROUP(type, TYPE, 4) ATTENTION_GROUP(type, TYPE, 5) ATTENTION_GROUP(type, TYPE, 6)   \
    ATTENTION_GROUP(type, TYPE, 7) ATTENTION_GROUP(type, TYPE, 8)
#define ATTENTION_SIZES(type)                                                                      \
    {attention_##type##_1, attention_##type##_2, attention_##type##_3, attention_##type##_4,       \
     attention_##type##_5, attention_##type##_6, attention_##type##_7, attention_##type##_8}
#else
#define ATTENTION_GROUPS(type, TYPE)                                                               \
    ATTENTION_GROUP(type, TYPE, 1) ATTENTION_GROUP(type, TYPE, 2) ATTENTION_GROUP(type, TYPE, 3)   \
    ATTENTION_GROUP(type, TYPE, 4)
#define ATTENTION_SIZES(type)                                                                      \
    {attention_##type##_1, attention_##type##_2, attention_##type##_3, attention_##type##_4}
#endif
ATTENTION_GROUPS(f32, F32)
ATTENTION_GROUPS(f16, F16)
ATTENTION_GROUPS(q8_0, Q8_0)

typedef void (*group_fn)(const llamay_attention *, const float *, const float *, int, int,
                         float *, float *, float *);

/* Tiles tile0 .. tile1 of a group of `heads` query heads (attention_tiles), by the pages' KV
   type. */
static void attention_group(int heads, const llamay_attention *a, const float *q,
                            const float *sinks, int tile0, int tile1, float *m, float *l,
                            float *out) {
    /* by llamay_kv_type, then by group size - 1 */
    static const group_fn by_type[3][ATTENTION_MAX_GROUP] = {
        ATTENTION_SIZES(f32),
        ATTENTION_SIZES(f16),
        ATTENTION_SIZES(q8_0),
    };
    by_type[a->kv->type][heads - 1](a, q, sinks, tile0, tile1, m, l, out);
}
#undef ATTENTION_SIZES
#undef ATTENTION_GROUPS
#undef ATTENTION_GROUP

/* A span's state (m2, l2, o2) folded into the state before it (m, l, o), for n <= 8 heads:
   both rescaled to their joint max by one v16_exp (lanes 0-7 the old state's factors, 8-15 the
   span's), o = o * a + o2 * b. The span path and the merge both fold with this. */
static void fold_span(int n, int D, float *m, float *l, float *o, const float *m2,
                      const float *l2, const float *o2) {
    float shift[16] = {0}, factor[16];
    for (int h = 0; h < n; h++) {
        const float m_new = m2[h] > m[h] ? m2[h] : m[h];
        shift[h] = m[h] == -INFINITY ? -INFINITY : m[h] - m_new;
        shift[8 + h] = m2[h] == -INFINITY ? -INFINITY : m2[h] - m_new;
        m[h] = m_new;
    }
    v16_store(factor, v16_exp(v16_load(shift)));
    for (int h = 0; h < n; h++) {
        const float a = factor[h], b = factor[8 + h];
        l[h] = l[h] * a + l2[h] * b;
        float *y = o + (size_t)h * D;
        const float *x = o2 + (size_t)h * D;
        for (int d = 0; d < D; d += 16) {
            v16_store(y + d, v16_fma(v16_load(x + d), v16_set1(b),
                                     v16_mul(v16_load(y + d), v16_set1(a))));
        }
    }
}

/* out divided by each head's sum */
static void normalise(int n, int D, const float *l, float *out) {
    for (int h = 0; h < n; h++) {
        const v16 inv = v16_set1(1.0f / l[h]);
        for (int d = 0; d < D; d += 16) {
            v16_store(out + (size_t)h * D + d, v16_mul(v16_load(out + (size_t)h * D + d), inv));
        }
    }
}

/* A span's output waits on the stack to be folded: heads x head_dim floats of it at most (the
   engine takes heads of up to 1024 dimensions; groups narrow for the widest). */
#define FOLD_FLOATS 4096

/* The query heads in groups of ATTENTION_MAX_GROUP and one of what is left: each head's result
   is the same in any group. */
static void attention(const llamay_attention *a) {
    const int D = a->kv->head_dim, P = a->kv->page_tokens;
    int first_span, last_span, tile0, tile1;
    llamay_attention_spans(a->pos, a->window, P, &first_span, &last_span);
    if (a->span_max != NULL) { /* one span on its own */
        llamay_attention_tiles(a->pos, a->window, P, a->span, &tile0, &tile1);
        for (int h0 = 0; h0 < a->n_q; h0 += ATTENTION_MAX_GROUP) {
            const int size = a->n_q - h0 < ATTENTION_MAX_GROUP ? a->n_q - h0 : ATTENTION_MAX_GROUP;
            const float *sinks = a->sinks != NULL && a->span == first_span ? a->sinks + h0 : NULL;
            attention_group(size, a, a->q + (size_t)h0 * D, sinks, tile0, tile1,
                            a->span_max + h0, a->span_sum + h0, a->out + (size_t)h0 * D);
        }
        return;
    }
    int group = ATTENTION_MAX_GROUP;
    if (last_span > first_span && group * D > FOLD_FLOATS) {
        group = FOLD_FLOATS / D > 0 ? FOLD_FLOATS / D : 1;
    }
    for (int h0 = 0; h0 < a->n_q; h0 += group) {
        const int size = a->n_q - h0 < group ? a->n_q - h0 : group;
        const float *q = a->q + (size_t)h0 * D;
        float *out = a->out + (size_t)h0 * D;
        float m[8], l[8];
        llamay_attention_tiles(a->pos, a->window, P, first_span, &tile0, &tile1);
        attention_group(size, a, q, a->sinks != NULL ? a->sinks + h0 : NULL, tile0, tile1, m, l,
                        out);
        for (int s = first_span + 1; s <= last_span; s++) {
            float m2[8], l2[8], o2[FOLD_FLOATS];
            llamay_attention_tiles(a->pos, a->window, P, s, &tile0, &tile1);
            attention_group(size, a, q, NULL, tile0, tile1, m2, l2, o2);
            fold_span(size, D, m, l, out, m2, l2, o2);
        }
        normalise(size, D, l, out);
    }
}

static void attention_merge(int n_spans, int n_q, int D, const float *spans, size_t stride,
                            float *out) {
    for (int h0 = 0; h0 < n_q; h0 += 8) {
        const int size = n_q - h0 < 8 ? n_q - h0 : 8;
        float m[8], l[8];
        memcpy(m, spans + h0, (size_t)size * sizeof(float));
        memcpy(l, spans + n_q + h0, (size_t)size * sizeof(float));
        memcpy(out + (size_t)h0 * D, spans + 2 * n_q + (size_t)h0 * D,
               (size_t)size * (size_t)D * sizeof(float));
        for (int k = 1; k < n_spans; k++) {
            const float *span = spans + (size_t)k * stride;
            fold_span(size, D, m, l, out + (size_t)h0 * D, span + h0, span + n_q + h0,
                      span + 2 * n_q + (size_t)h0 * D);
        }
        normalise(size, D, l, out + (size_t)h0 * D);
    }
}
#undef SCORE_ROW

/* ---- log-sum-exp over a vocabulary ---- */

/* Lanes past n are -inf: they count for neither the max nor the sum (e^-inf is 0). */
static inline v16 load_or_minus_inf(const float *x, int n) {
    if (n >= 16) {
        return v16_load(x);
    }
    float tmp[16];
    for (int i = 0; i < 16; i++) tmp[i] = i < n ? x[i] : -INFINITY;
    return v16_load(tmp);
}

static void logsumexp(const float *x, int n, float *max, float *sum) {
    v16 mv = v16_set1(-INFINITY);
    for (int i = 0; i < n; i += 16) {
        mv = v16_max(mv, load_or_minus_inf(x + i, n - i));
    }
    const float mx = v16_hmax(mv);
    const v16 shift = v16_set1(mx);
    v16 acc = v16_zero();
    for (int i = 0; i < n; i += 16) {
        acc = v16_add(acc, v16_exp(v16_sub(load_or_minus_inf(x + i, n - i), shift)));
    }
    *max = mx;
    *sum = v16_tree(acc);
}

static const llamay_kernels TABLE = {
    .name = KERNELS_NAME,
    .set = KERNELS_SET,
    .rms_norm = rms_norm,
    .layer_norm = layer_norm,
    .gated = gated,
    .softcap = softcap,
    .attention = attention,
    .attention_merge = attention_merge,
    .logsumexp = logsumexp,
};

const llamay_kernels *KERNELS_TABLE(void) { return &TABLE; }
