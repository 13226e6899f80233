/* Quantizers: fp32 -> ggml blocks, bit-exact with ggml's reference quantizers
   (quantize_row_*_ref in ggml-quants.c), for the formats llamay writes or uses for activations.

   Rounding differs by format, as in ggml: Q4_0..Q5_1 truncate x + 0.5 (after an offset), Q8_0
   uses roundf (halves away from zero), Q8_K the float-magic nearest_int (halves to even). The
   SIMD versions (`_avx2` in quantize_avx2.c, chosen per kernel set by quants.c's table)
   reproduce the scalar ones exactly, ties included. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fp16.h"
#include "mathfn.h"
#include "quants.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ======================================================================== plain numbers */

void llamay_quantize_row_f32_ref(const float *restrict x, void *restrict vy, int64_t n) {
    memcpy(vy, x, (size_t)n * sizeof(float));
}

void llamay_quantize_row_f16_ref(const float *restrict x, void *restrict vy, int64_t n) {
    ggml_half *y = vy;
    for (int64_t i = 0; i < n; i++) {
        y[i] = llamay_fp32_to_fp16_scalar(x[i]);
    }
}

void llamay_quantize_row_bf16_ref(const float *restrict x, void *restrict vy, int64_t n) {
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++) {
        y[i] = llamay_fp32_to_bf16(x[i]);
    }
}

/* ======================================================================== 4- and 5-bit */

/* The element of largest magnitude, with its sign (the first one, on ties). */
static inline float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static inline void min_max(const float *x, int n, float *min, float *max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

void llamay_quantize_row_q4_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float d = signed_absmax(x, QK4_0) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = llamay_fp32_to_fp16_scalar(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const uint8_t x0 = MIN(15, (int8_t)(x[j] * id + 8.5f));
            const uint8_t x1 = MIN(15, (int8_t)(x[j + QK4_0 / 2] * id + 8.5f));
            y[i].qs[j] = x0 | (x1 << 4);
        }
    }
}

void llamay_quantize_row_q4_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        min_max(x, QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = llamay_fp32_to_fp16_scalar(d);
        y[i].m = llamay_fp32_to_fp16_scalar(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const uint8_t x0 = MIN(15, (int8_t)((x[j] - min) * id + 0.5f));
            const uint8_t x1 = MIN(15, (int8_t)((x[j + QK4_1 / 2] - min) * id + 0.5f));
            y[i].qs[j] = x0 | (x1 << 4);
        }
    }
}

/* Packs 32 five-bit values: low nibbles as in Q4_0, fifth bits into the uint32 qh. */
static inline void pack_q5(const uint8_t q[32], uint8_t qs[16], uint8_t qh_bytes[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4);
        qh |= ((q[j] & 0x10u) >> 4) << j;
        qh |= ((q[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qh_bytes, &qh, sizeof qh);
}

void llamay_quantize_row_q5_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float d = signed_absmax(x, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = llamay_fp32_to_fp16_scalar(d);
        uint8_t q[QK5_0];
        for (int j = 0; j < QK5_0; j++) {
            q[j] = MIN(31, (int8_t)(x[j] * id + 16.5f));
        }
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

void llamay_quantize_row_q5_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        min_max(x, QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = llamay_fp32_to_fp16_scalar(d);
        y[i].m = llamay_fp32_to_fp16_scalar(min);
        uint8_t q[QK5_1];
        for (int j = 0; j < QK5_1; j++) {
            q[j] = (uint8_t)((x[j] - min) * id + 0.5f); /* no MIN, as in ggml: it stays <= 31 */
        }
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

/* ======================================================================== Q8_0 */

/* A rounded value as int8. In range it is C's conversion, as in ggml; out of range (reachable
   only from inf, NaN, or a block whose inverse scale overflowed, where C leaves the conversion
   undefined) it saturates, and NaN gives 0, so that llamay's result is defined. */
static inline int8_t saturate_i8(float r) {
    if (r != r) return 0;
    return r >= 127.0f ? 127 : r <= -128.0f ? -128 : (int8_t)r;
}

static inline void quantize_block_q8_0_ref(const float *restrict x, block_q8_0 *restrict y) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) {
        amax = MAX(amax, fabsf(x[j]));
    }
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = llamay_fp32_to_fp16_scalar(d);
    for (int j = 0; j < QK8_0; j++) {
        y->qs[j] = saturate_i8(roundf(x[j] * id));
    }
}

void llamay_quantize_row_q8_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        quantize_block_q8_0_ref(x + i * QK8_0, y + i);
    }
}

/* ======================================================================== Q8_K */

/* Round to nearest, ties to even, by adding 1.5 * 2^23: valid for |v| < 2^22. */
static inline int nearest_int(float v) {
    const float shifted = v + 12582912.f;
    return (int)(llamay_f32_bits(shifted) & 0x007FFFFF) - 0x00400000;
}

/* ggml leaves bsums unwritten in an all-zero block; llamay writes its true value, 0. */
static inline void quantize_block_q8_K_ref(const float *restrict x, block_q8_K *restrict y) {
    float max = 0, amax = 0;
    for (int j = 0; j < QK_K; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (!amax) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; j++) {
        y->qs[j] = (int8_t)MIN(127, nearest_int(iscale * x[j]));
    }
    for (int j = 0; j < QK_K / 16; j++) {
        int sum = 0;
        for (int l = 0; l < 16; l++) {
            sum += y->qs[16 * j + l];
        }
        y->bsums[j] = (int16_t)sum;
    }
    y->d = 1 / iscale;
}

void llamay_quantize_row_q8_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) {
        quantize_block_q8_K_ref(x + i * QK_K, y + i);
    }
}

/* ======================================================================== K-quants, MXFP4

   What llama-quantize writes for Q4_K, Q5_K and Q6_K without an importance matrix, and for
   MXFP4 (ggml's quantize_row_{q4_K,q5_K,q6_K,mxfp4}_ref), so that a file llamay writes from F16
   values holds the bytes llama-quantize would have written from them. These exist for writing
   files (the synthetic models of the tests), not for the forward step, so there is no SIMD
   version: the arithmetic below is the definition, in ggml's order, each step in fp32. */

/* The best (scale, -min) of n values x for levels 0..nmax, weighted: the plain fit, then
   nstep + 1 candidate scales around it, each refitted by weighted least squares; the one of
   least weighted squared error wins (ggml's make_qkx2_quants without the mean-absolute
   option). L gets the levels; returns the scale, *neg_min the min's negation (>= 0). */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MAX(0, MIN(nmax, l));
        const float diff = scale * L[i] + min - x[i];
        best += w[i] * (diff * diff);
    }
    uint8_t trial[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = MAX(0, MIN(nmax, nearest_int(iscale * (x[i] - min))));
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                const float diff = this_scale * trial[i] + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best) {
                memcpy(L, trial, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Q4_K's and Q5_K's twelve bytes of eight 6-bit scales and mins (the layout ggml's
   get_scale_min_k4 reads). */
static void pack_scales_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t q[12]) {
    memset(q, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] = ls[j];
            q[j + 4] = lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

static void unpack_scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One Q4_K or Q5_K super-block: eight sub-blocks of 32, each fitted on levels 0..nmax with
   weights |x| + rms(x), their scales and mins quantized to 6 bits against the largest, then
   the levels recomputed with the quantized ones. Fills scales[12], d, dmin and L[256]. */
static void quantize_super_k4(const float *x, int nmax, float rmin, int nstep, uint8_t scales[12],
                              ggml_half *d_out, ggml_half *dmin_out, uint8_t L[QK_K]) {
    float sub_scale[8], sub_min[8], weights[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        sub_scale[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &sub_min[j], rmin,
                                     0.1f, nstep);
        if (sub_scale[j] > max_scale) max_scale = sub_scale[j];
        if (sub_min[j] > max_min) max_min = sub_min[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        /* as ggml: the int narrowed to uint8_t before the MIN */
        ls[j] = (uint8_t)MIN(63, (uint8_t)nearest_int(inv_scale * sub_scale[j]));
        lm[j] = (uint8_t)MIN(63, (uint8_t)nearest_int(inv_min * sub_min[j]));
    }
    pack_scales_k4(ls, lm, scales);
    *d_out = llamay_fp32_to_fp16_scalar(max_scale / 63.f);
    *dmin_out = llamay_fp32_to_fp16_scalar(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        unpack_scale_min_k4(j, scales, &sc, &m);
        const float d = llamay_fp16_to_fp32_scalar(*d_out) * sc;
        if (!d) continue;
        const float dm = llamay_fp16_to_fp32_scalar(*dmin_out) * m;
        for (int i = 0; i < 32; i++) {
            L[32 * j + i] = (uint8_t)MAX(0, MIN(nmax, nearest_int((x[32 * j + i] + dm) / d)));
        }
    }
}

void llamay_quantize_row_q4_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_super_k4(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

void llamay_quantize_row_q5_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_super_k4(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int j = 0; j < QK_K; j += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[j + l], l2 = L[j + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[l] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[l] |= m2;
                }
                ql[l] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

/* The scale of n values x on the signed levels -nmax..nmax-1 that fits them best by x^2-weighted
   least squares, over the plain scale and 18 candidates around it (ggml's make_qx_quants with
   rmse_type 1). L gets the levels plus nmax. */
static float fit_signed_scale(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) { /* all zero, as ggml's GROUP_MAX_EPS says */
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = MAX(-nmax, MIN(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = MAX(-nmax, MIN(nmax - 1, nearest_int(iscale * x[i])));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, nearest_int(iscale * x[i]))));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void llamay_quantize_row_q6_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q6_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            scales[ib] = fit_signed_scale(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < 1e-15f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = llamay_fp32_to_fp16_scalar(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ib++) {
            y[i].scales[ib] = (int8_t)MIN(127, nearest_int(iscale * scales[ib]));
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = llamay_fp16_to_fp32_scalar(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (int8_t)(MAX(-32, MIN(31, nearest_int(x[16 * j + l] / d))) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

/* MXFP4's e2m1 values, doubled (ggml's kvalues_mxfp4) */
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* E8M0 exponent to fp32, halved (the values above are doubled) */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Each block of 32: the shared exponent floor(log2 amax) - 2 (so that amax lands near the top
   value, 6), then each value's nearest e2m1 value (the first, on ties). log2 is taken in double
   and rounded to fp32, as a correctly rounded log2f gives it, without asking libm. */
void llamay_quantize_row_mxfp4_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_mxfp4 *y = vy;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; j++) {
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        }
        uint8_t e = 0;
        if (amax > 0.0f) {
            const float log2_amax = (float)(llamay_log_d((double)amax) / 0.69314718055994530942);
            e = (uint8_t)(floorf(log2_amax) - 2 + 127);
        }
        const float d = e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            uint8_t q[2];
            for (int h = 0; h < 2; h++) {
                const float v = x[j + h * QK_MXFP4 / 2];
                int best = 0;
                float best_err = fabsf(mxfp4_values[0] * d - v);
                for (int k = 1; k < 16; k++) {
                    const float err = fabsf(mxfp4_values[k] * d - v);
                    if (err < best_err) {
                        best = k;
                        best_err = err;
                    }
                }
                q[h] = (uint8_t)best;
            }
            y[i].qs[j] = (uint8_t)(q[0] | (q[1] << 4));
        }
    }
}
