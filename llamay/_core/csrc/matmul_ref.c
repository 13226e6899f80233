/* The reference kernels: plain C that defines every matmul result (matmul.h states the order).

   Each integer kernel is one function giving, for weight block b, the exact integer dot
   products with the activation block and the fp32 scales they are weighed with; the shared
   loop puts them into lane b % 8. Element layouts and scale packings follow ggml's formats
   (ggml-common.h, and the generic vec_dot functions of ggml-cpu/quants.c). */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "fp16.h"
#include "iq_tables.h"
#include "matmul_kernels.h"
#include "quants.h"

typedef struct {
    float s1, s2;   /* scales */
    int32_t i1, i2; /* integer dot products; the second term is used by types with mins */
} block_terms;

/* ==== 32-element formats x Q8_0 ==== */

static inline float act_scale(const llamay_act_q *a, int b) { return a->d[b]; }

static inline void terms_q4_0(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q4_0 *x = (const block_q4_0 *)row + b;
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) {
        sum += ((x->qs[j] & 0xF) - 8) * q8[j] + ((x->qs[j] >> 4) - 8) * q8[j + 16];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * act_scale(a, b);
}

static inline void terms_q4_1(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q4_1 *x = (const block_q4_1 *)row + b;
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) {
        sum += (x->qs[j] & 0xF) * q8[j] + (x->qs[j] >> 4) * q8[j + 16];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * act_scale(a, b);
    t->i2 = a->sum[b];
    t->s2 = llamay_fp16_to_fp32(x->m) * act_scale(a, b);
}

static inline uint32_t q5_high_bits(const uint8_t qh[4]) {
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    return h;
}

static inline void terms_q5_0(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q5_0 *x = (const block_q5_0 *)row + b;
    const uint32_t qh = q5_high_bits(x->qh);
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) {
        const int v0 = ((x->qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
        const int v1 = ((x->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
        sum += v0 * q8[j] + v1 * q8[j + 16];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * act_scale(a, b);
}

static inline void terms_q5_1(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q5_1 *x = (const block_q5_1 *)row + b;
    const uint32_t qh = q5_high_bits(x->qh);
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) {
        const int v0 = (x->qs[j] & 0xF) | (((qh >> j) & 1) << 4);
        const int v1 = (x->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
        sum += v0 * q8[j] + v1 * q8[j + 16];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * act_scale(a, b);
    t->i2 = a->sum[b];
    t->s2 = llamay_fp16_to_fp32(x->m) * act_scale(a, b);
}

static inline void terms_q8_0(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q8_0 *x = (const block_q8_0 *)row + b;
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 32; j++) {
        sum += x->qs[j] * q8[j];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * act_scale(a, b);
}

static inline void terms_iq4_nl(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq4_nl *x = (const block_iq4_nl *)row + b;
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) {
        sum += kvalues_iq4nl[x->qs[j] & 0xF] * q8[j] + kvalues_iq4nl[x->qs[j] >> 4] * q8[j + 16];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * act_scale(a, b);
}

static inline void terms_mxfp4(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_mxfp4 *x = (const block_mxfp4 *)row + b;
    const int8_t *q8 = a->qs + 32 * b;
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) {
        sum += kvalues_mxfp4[x->qs[j] & 0xF] * q8[j] + kvalues_mxfp4[x->qs[j] >> 4] * q8[j + 16];
    }
    t->i1 = sum;
    t->s1 = llamay_e8m0_to_fp32_half(x->e) * act_scale(a, b);
}

/* ==== 256-element formats x Q8_K ==== */

static inline void terms_q2_K(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q2_K *x = (const block_q2_K *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    const int16_t *bsum = a->sum + 16 * b;
    int32_t sum = 0;
    for (int e = 0; e < 256; e++) {
        const int chunk = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
        sum += (x->scales[e / 16] & 0xF) * ((x->qs[32 * chunk + l] >> shift) & 3) * q8[e];
    }
    int32_t mins = 0;
    for (int j = 0; j < 16; j++) {
        mins += (x->scales[j] >> 4) * bsum[j];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
    t->i2 = -mins;
    t->s2 = llamay_fp16_to_fp32(x->dmin) * a->d[b];
}

static inline void terms_q3_K(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q3_K *x = (const block_q3_K *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int scales[16];
    llamay_q3_K_scales(x->scales, scales);
    int32_t sum = 0;
    for (int e = 0; e < 256; e++) {
        const int chunk = e / 128, shift = (e % 128) / 32, l = e % 32;
        const int low = (x->qs[32 * chunk + l] >> (2 * shift)) & 3;
        const int high = (x->hmask[l] >> (4 * chunk + shift)) & 1;
        sum += scales[e / 16] * (low - (high ? 0 : 4)) * q8[e];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
}

static inline void terms_q4_K(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q4_K *x = (const block_q4_K *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    const int16_t *bsum = a->sum + 16 * b;
    int32_t sum = 0, mins = 0;
    for (int j = 0; j < 8; j++) {
        int scale, min;
        llamay_q4_K_scale_min(x->scales, j, &scale, &min);
        const uint8_t *qs = x->qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {
            dot += ((qs[l] >> shift) & 0xF) * q8[32 * j + l];
        }
        sum += scale * dot;
        mins += min * (bsum[2 * j] + bsum[2 * j + 1]);
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
    t->i2 = -mins;
    t->s2 = llamay_fp16_to_fp32(x->dmin) * a->d[b];
}

static inline void terms_q5_K(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q5_K *x = (const block_q5_K *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    const int16_t *bsum = a->sum + 16 * b;
    int32_t sum = 0, mins = 0;
    for (int j = 0; j < 8; j++) {
        int scale, min;
        llamay_q4_K_scale_min(x->scales, j, &scale, &min);
        const uint8_t *qs = x->qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {
            const int q = ((qs[l] >> shift) & 0xF) | (((x->qh[l] >> j) & 1) << 4);
            dot += q * q8[32 * j + l];
        }
        sum += scale * dot;
        mins += min * (bsum[2 * j] + bsum[2 * j + 1]);
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
    t->i2 = -mins;
    t->s2 = llamay_fp16_to_fp32(x->dmin) * a->d[b];
}

static inline void terms_q6_K(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_q6_K *x = (const block_q6_K *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int e = 0; e < 256; e++) {
        /* per 128 elements: ql[l] low/high nibble -> e and e+64, ql[l+32] -> e+32, e+96 */
        const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
        const uint8_t *ql = x->ql + 64 * half;
        const uint8_t *qh = x->qh + 32 * half;
        const int low = (ql[l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
        const int high = (qh[l] >> (2 * quarter)) & 3;
        sum += x->scales[e / 16] * ((low | (high << 4)) - 32) * q8[e];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
}

static inline void terms_iq4_xs(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq4_xs *x = (const block_iq4_xs *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = x->qs + 16 * ib;
        int32_t dot = 0;
        for (int j = 0; j < 16; j++) {
            dot += kvalues_iq4nl[qs[j] & 0xF] * q8[32 * ib + j] +
                   kvalues_iq4nl[qs[j] >> 4] * q8[32 * ib + 16 + j];
        }
        sum += llamay_iq4_xs_scale(x->scales_h, x->scales_l, ib) * dot;
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
}

static inline void terms_tq1_0(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    /* base-3 digits, most significant first: digit l of byte q is (uint8)(q * 3^l) * 3 >> 8 */
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const block_tq1_0 *x = (const block_tq1_0 *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int l = 0; l < 5; l++) {
        for (int m = 0; m < 32; m++) { /* qs[0..31]: elements l*32 + m */
            const uint8_t q = (uint8_t)(x->qs[m] * pow3[l]);
            sum += (((q * 3) >> 8) - 1) * q8[32 * l + m];
        }
        for (int m = 0; m < 16; m++) { /* qs[32..47]: elements 160 + l*16 + m */
            const uint8_t q = (uint8_t)(x->qs[32 + m] * pow3[l]);
            sum += (((q * 3) >> 8) - 1) * q8[160 + 16 * l + m];
        }
    }
    for (int l = 0; l < 4; l++) {
        for (int j = 0; j < 4; j++) { /* qh: elements 240 + l*4 + j */
            const uint8_t q = (uint8_t)(x->qh[j] * pow3[l]);
            sum += (((q * 3) >> 8) - 1) * q8[240 + 4 * l + j];
        }
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
}

static inline void terms_tq2_0(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_tq2_0 *x = (const block_tq2_0 *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int e = 0; e < 256; e++) {
        const int chunk = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
        sum += (((x->qs[32 * chunk + l] >> shift) & 3) - 1) * q8[e];
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
}

/* The IQ2/IQ3 grids hold magnitudes; bit j of a sign byte negates element j of its 8. */
static inline int32_t signed_grid_dot(const uint8_t *grid, uint8_t signs, const int8_t *q8, int n) {
    int32_t dot = 0;
    for (int j = 0; j < n; j++) {
        dot += grid[j] * q8[j] * ((signs >> j) & 1 ? -1 : 1);
    }
    return dot;
}

static inline int32_t signed_grid_dot_shifted(const uint8_t *grid, uint8_t signs, int first_bit,
                                              const int8_t *q8) {
    int32_t dot = 0;
    for (int j = 0; j < 4; j++) {
        dot += grid[j] * q8[j] * ((signs >> (first_bit + j)) & 1 ? -1 : 1);
    }
    return dot;
}

static inline void terms_iq2_xxs(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq2_xxs *x = (const block_iq2_xxs *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux[2];
        memcpy(aux, x->qs + 4 * ib, sizeof aux);
        const uint8_t *idx = (const uint8_t *)aux;
        int32_t dot = 0;
        for (int l = 0; l < 4; l++) {
            const uint8_t *grid = (const uint8_t *)(iq2xxs_grid + idx[l]);
            const uint8_t signs = ksigns_iq2xs[(aux[1] >> (7 * l)) & 127];
            dot += signed_grid_dot(grid, signs, q8 + 32 * ib + 8 * l, 8);
        }
        sum += (int32_t)(2 * (aux[1] >> 28) + 1) * dot;
    }
    t->i1 = sum;
    t->s1 = (0.125f * llamay_fp16_to_fp32(x->d)) * a->d[b];
}

static inline void terms_iq2_xs(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq2_xs *x = (const block_iq2_xs *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ib++) {
        for (int half = 0; half < 2; half++) {
            int32_t dot = 0;
            for (int l = 2 * half; l < 2 * half + 2; l++) {
                const uint16_t q = x->qs[4 * ib + l];
                const uint8_t *grid = (const uint8_t *)(iq2xs_grid + (q & 511));
                dot += signed_grid_dot(grid, ksigns_iq2xs[q >> 9], q8 + 32 * ib + 8 * l, 8);
            }
            sum += (2 * ((x->scales[ib] >> (4 * half)) & 0xF) + 1) * dot;
        }
    }
    t->i1 = sum;
    t->s1 = (0.125f * llamay_fp16_to_fp32(x->d)) * a->d[b];
}

static inline void terms_iq2_s(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq2_s *x = (const block_iq2_s *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    const uint8_t *signs = x->qs + 32;
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ib++) {
        for (int half = 0; half < 2; half++) {
            int32_t dot = 0;
            for (int l = 2 * half; l < 2 * half + 2; l++) {
                const int index = x->qs[4 * ib + l] | ((x->qh[ib] << (8 - 2 * l)) & 0x300);
                const uint8_t *grid = (const uint8_t *)(iq2s_grid + index);
                dot += signed_grid_dot(grid, signs[4 * ib + l], q8 + 32 * ib + 8 * l, 8);
            }
            sum += (2 * ((x->scales[ib] >> (4 * half)) & 0xF) + 1) * dot;
        }
    }
    t->i1 = sum;
    t->s1 = (0.125f * llamay_fp16_to_fp32(x->d)) * a->d[b];
}

static inline void terms_iq3_xxs(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq3_xxs *x = (const block_iq3_xxs *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    const uint8_t *scales_and_signs = x->qs + 64;
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux;
        memcpy(&aux, scales_and_signs + 4 * ib, sizeof aux);
        int32_t dot = 0;
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
            const int8_t *q = q8 + 32 * ib + 8 * l;
            const uint8_t *grid1 = (const uint8_t *)(iq3xxs_grid + x->qs[8 * ib + 2 * l]);
            const uint8_t *grid2 = (const uint8_t *)(iq3xxs_grid + x->qs[8 * ib + 2 * l + 1]);
            dot += signed_grid_dot_shifted(grid1, signs, 0, q) +
                   signed_grid_dot_shifted(grid2, signs, 4, q + 4);
        }
        sum += (int32_t)(2 * (aux >> 28) + 1) * dot;
    }
    t->i1 = sum;
    t->s1 = (0.25f * llamay_fp16_to_fp32(x->d)) * a->d[b];
}

static inline void terms_iq3_s(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t) {
    const block_iq3_s *x = (const block_iq3_s *)row + b;
    const int8_t *q8 = a->qs + 256 * b;
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ib++) {
        int32_t dot = 0;
        for (int l = 0; l < 4; l++) {
            const int i1 = x->qs[8 * ib + 2 * l] | ((x->qh[ib] << (8 - 2 * l)) & 256);
            const int i2 = x->qs[8 * ib + 2 * l + 1] | ((x->qh[ib] << (7 - 2 * l)) & 256);
            const uint8_t signs = x->signs[4 * ib + l];
            const int8_t *q = q8 + 32 * ib + 8 * l;
            dot += signed_grid_dot_shifted((const uint8_t *)(iq3s_grid + i1), signs, 0, q) +
                   signed_grid_dot_shifted((const uint8_t *)(iq3s_grid + i2), signs, 4, q + 4);
        }
        sum += (2 * ((x->scales[ib / 2] >> (4 * (ib % 2))) & 0xF) + 1) * dot;
    }
    t->i1 = sum;
    t->s1 = llamay_fp16_to_fp32(x->d) * a->d[b];
}

/* ==== the canonical loop ==== */

typedef void (*terms_fn)(const uint8_t *row, const llamay_act_q *a, int b, block_terms *t);

static inline float dot_blocks(terms_fn terms, int two_terms, const uint8_t *row,
                               const llamay_act_q *a, int n_blocks) {
    float acc[LLAMAY_QUANT_LANES] = {0};
    for (int b = 0; b < n_blocks; b++) {
        block_terms t;
        terms(row, a, b, &t);
        float *lane = &acc[b % LLAMAY_QUANT_LANES];
        *lane = fmaf(t.s1, (float)t.i1, *lane);
        if (two_terms) {
            *lane = fmaf(t.s2, (float)t.i2, *lane);
        }
    }
    return llamay_tree8(acc);
}

#define REFERENCE_KERNEL(name, block_elems, two_terms)                                          \
    static void reference_##name(const llamay_weight *w, const uint8_t *act, int n_tokens,      \
                                 float *out, size_t out_stride, int row_begin, int row_end) {   \
        for (int t = 0; t < n_tokens; t++) {                                                    \
            const llamay_act_q a =                                                              \
                llamay_act_q_row(act + (size_t)t * w->act_row_bytes, w->act_kind, w->n_cols);   \
            for (int r = row_begin; r < row_end; r++) {                                         \
                out[(size_t)t * out_stride + r] = dot_blocks(                                   \
                    terms_##name, two_terms, w->data + (size_t)r * w->row_bytes, &a,            \
                    w->n_cols / (block_elems));                                                 \
            }                                                                                   \
        }                                                                                       \
    }

REFERENCE_KERNEL(q4_0, 32, 0)
REFERENCE_KERNEL(q4_1, 32, 1)
REFERENCE_KERNEL(q5_0, 32, 0)
REFERENCE_KERNEL(q5_1, 32, 1)
REFERENCE_KERNEL(q8_0, 32, 0)
REFERENCE_KERNEL(iq4_nl, 32, 0)
REFERENCE_KERNEL(mxfp4, 32, 0)
REFERENCE_KERNEL(q2_K, 256, 1)
REFERENCE_KERNEL(q3_K, 256, 0)
REFERENCE_KERNEL(q4_K, 256, 1)
REFERENCE_KERNEL(q5_K, 256, 1)
REFERENCE_KERNEL(q6_K, 256, 0)
REFERENCE_KERNEL(iq4_xs, 256, 0)
REFERENCE_KERNEL(tq1_0, 256, 0)
REFERENCE_KERNEL(tq2_0, 256, 0)
REFERENCE_KERNEL(iq2_xxs, 256, 0)
REFERENCE_KERNEL(iq2_xs, 256, 0)
REFERENCE_KERNEL(iq2_s, 256, 0)
REFERENCE_KERNEL(iq3_xxs, 256, 0)
REFERENCE_KERNEL(iq3_s, 256, 0)

/* ==== fp32 weights, and types dequantized to fp32 ==== */

static float dot_f32(const float *w, const float *x, int n) {
    float acc[LLAMAY_FLOAT_LANES] = {0};
    for (int i = 0; i < n; i++) {
        acc[i % LLAMAY_FLOAT_LANES] = fmaf(w[i], x[i], acc[i % LLAMAY_FLOAT_LANES]);
    }
    return llamay_tree16(acc);
}

/* One row at a time into a buffer, then the fp32 dot against every token. */
static void reference_dequantized(const llamay_weight *w, const uint8_t *act, int n_tokens,
                                  float *out, size_t out_stride, int row_begin, int row_end) {
    const llamay_quant_type *type = llamay_quant_type_of(w->type);
    float *row = malloc((size_t)w->n_cols * sizeof(float));
    if (row == NULL) {
        abort(); /* n_cols floats; a machine without them cannot hold the model either */
    }
    for (int r = row_begin; r < row_end; r++) {
        type->to_float[LLAMAY_KERNELS_REFERENCE](w->data + (size_t)r * w->row_bytes, row,
                                                 w->n_cols);
        for (int t = 0; t < n_tokens; t++) {
            const float *x = (const float *)(act + (size_t)t * w->act_row_bytes);
            out[(size_t)t * out_stride + r] = dot_f32(row, x, w->n_cols);
        }
    }
    free(row);
}

static void reference_f32(const llamay_weight *w, const uint8_t *act, int n_tokens, float *out,
                          size_t out_stride, int row_begin, int row_end) {
    for (int t = 0; t < n_tokens; t++) {
        const float *x = (const float *)(act + (size_t)t * w->act_row_bytes);
        for (int r = row_begin; r < row_end; r++) {
            const float *row = (const float *)(w->data + (size_t)r * w->row_bytes);
            out[(size_t)t * out_stride + r] = dot_f32(row, x, w->n_cols);
        }
    }
}

#define REFERENCE_HALF_KERNEL(name, to_fp32)                                                    \
    static void reference_##name(const llamay_weight *w, const uint8_t *act, int n_tokens,      \
                                 float *out, size_t out_stride, int row_begin, int row_end) {   \
        for (int t = 0; t < n_tokens; t++) {                                                    \
            const float *x = (const float *)(act + (size_t)t * w->act_row_bytes);               \
            for (int r = row_begin; r < row_end; r++) {                                         \
                const uint16_t *row = (const uint16_t *)(w->data + (size_t)r * w->row_bytes);   \
                float acc[LLAMAY_FLOAT_LANES] = {0};                                            \
                for (int i = 0; i < w->n_cols; i++) {                                           \
                    float *lane = &acc[i % LLAMAY_FLOAT_LANES];                                 \
                    *lane = fmaf(to_fp32(row[i]), x[i], *lane);                                 \
                }                                                                               \
                out[(size_t)t * out_stride + r] = llamay_tree16(acc);                           \
            }                                                                                   \
        }                                                                                       \
    }

REFERENCE_HALF_KERNEL(f16, llamay_fp16_to_fp32)
REFERENCE_HALF_KERNEL(bf16, llamay_bf16_to_fp32)

/* The kernel of each type, by its matmul column in ggml_types.h. */
#define REFERENCE_CASE_FLOAT(NAME, name) case LLAMAY_TYPE_##NAME: return reference_##name;
#define REFERENCE_CASE_Q32 REFERENCE_CASE_FLOAT
#define REFERENCE_CASE_K REFERENCE_CASE_FLOAT
#define REFERENCE_CASE_DEQ(NAME, name) case LLAMAY_TYPE_##NAME: return reference_dequantized;
#define REFERENCE_CASE_NONE(NAME, name)
#define REFERENCE_CASE(NAME, name, id, elems, bytes, deq, quant, matmul, ...)                     \
    REFERENCE_CASE_##matmul(NAME, name)

llamay_matmul_fn llamay_reference_kernel(int type) {
    switch (type) {
    LLAMAY_GGML_TYPES(REFERENCE_CASE)
    default: return NULL;
    }
}
