/* Quantizers: fp32 -> ggml blocks, bit-exact with ggml's quantizers (quantize_row_*_ref in
   ggml-quants.c, and the importance-weighted quantize_q*_* paths llama-quantize takes with an
   imatrix), for the formats llamay writes or uses for activations.

   Rounding differs by format, as in ggml: Q4_0..Q5_1 truncate x + 0.5 (after an offset), Q8_0
   uses roundf (halves away from zero), Q8_K the float-magic nearest_int (halves to even). The
   SIMD versions (`_avx2` in quantize_avx2.c, chosen per kernel set by quants.c's table)
   reproduce the scalar ones exactly, ties included. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
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

/* ======================================================================== K-quants

   What llama-quantize writes for Q2_K .. Q6_K, with and without an importance matrix: ggml's
   quantize_row_q*_K_ref (no matrix) and the weighted fits its quantize_q*_K switch to when given
   one, so that a file llamay writes from F16 values holds the bytes llama-quantize would have
   written from them. These serve files, not the forward step, so there is no SIMD version:
   the arithmetic below is the definition, in ggml's order, each step in fp32 (a fused
   multiply-add, or a sum taken in another order, changes a level now and then). */

/* ---- fits: levels and scales for a group of values */

/* The best (scale, -min) of n values x for levels 0..nmax, weighted: the plain fit, then
   nstep + 1 candidate scales around it, each refitted by weighted least squares; the one of
   least weighted error wins, the error being squared or, with absolute_error, absolute
   (ggml's make_qkx2_quants, and make_qkx3_quants when given weights). L gets the levels;
   returns the scale, *neg_min the min's negation (>= 0). */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, float rmin, float rdelta, int nstep,
                           int absolute_error) {
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
        best += w[i] * (absolute_error ? fabsf(diff) : diff * diff);
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
                err += w[i] * (absolute_error ? fabsf(diff) : diff * diff);
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

/* The largest magnitude of n values, with its sign (the first, on ties); *amax its size. */
static inline float signed_amax(int n, const float *x, float *amax) {
    float max = 0;
    *amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > *amax) {
            *amax = ax;
            max = x[i];
        }
    }
    return max;
}

/* The scale of n values x on the signed levels -nmax..nmax-1 that fits them best by weighted
   least squares (weights w, or x^2 where w is NULL), over the plain scale and 18 candidates
   around it (ggml's make_qx_quants with rmse_type 1). L gets the levels plus nmax. */
static float fit_signed_scale(int n, int nmax, const float *x, const float *w, int8_t *L) {
    float amax;
    const float max = signed_amax(n, x, &amax);
    if (amax < 1e-15f) { /* all zero, as ggml's GROUP_MAX_EPS says */
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = MAX(-nmax, MIN(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        const float wi = w ? w[i] : x[i] * x[i];
        sumlx += wi * x[i] * l;
        suml2 += wi * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = MAX(-nmax, MIN(nmax - 1, nearest_int(iscale * x[i])));
            const float wi = w ? w[i] : x[i] * x[i];
            sumlx += wi * x[i] * l;
            suml2 += wi * l * l;
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

/* Q3_K's fit without an importance matrix (ggml's make_q3_quants with do_rmse): the plain
   levels, then up to five passes that move one level at a time wherever that lowers the
   x^2-weighted error. L gets the levels plus nmax. */
static float fit_signed_scale_by_moves(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = signed_amax(n, x, &amax);
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = MAX(-nmax, MIN(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int l = MAX(-nmax, MIN(nmax - 1, nearest_int(x[i] * sl2 / slx)));
                if (l != L[i]) {
                    slx += w * x[i] * l;
                    sl2 += w * l * l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        moved++;
                    }
                }
            }
        }
        if (!moved) break;
    }
    for (int i = 0; i < n; i++) L[i] += nmax;
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* The scale of n non-negative values x (a super-block's scales or mins) on levels 0..nmax,
   weighted by w: the plain scale and 8 candidates around it by weighted squared error, then
   up to five passes of single-level moves (ggml's make_qp_quants). The levels are stored as
   bytes, as ggml stores them, wrapping should a fit ever give a negative one. */
static float fit_positive_scale(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = MAX(max, x[i]);
    if (max < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            const int l = MIN(nmax, nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = MIN(nmax, nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                const int l = MIN(nmax, nearest_int(x[i] * sl2 / slx));
                if (l != L[i]) {
                    slx += w[i] * x[i] * l;
                    sl2 += w[i] * l * l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        moved++;
                    }
                }
            }
        }
        if (!moved) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Importance weights of a group: the matrix's weight times sqrt(sigma2 + x^2), where sigma2
   is the mean square of the values around it. */
static inline void importance(int n, const float *x, const float *qw, float sigma2, float *w,
                              float *sum_w) {
    for (int l = 0; l < n; l++) {
        w[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
    }
    if (sum_w != NULL) {
        float sum = 0;
        for (int l = 0; l < n; l++) sum += w[l];
        *sum_w = sum;
    }
}

static inline float sum_of_squares(int64_t n, const float *x) {
    float sum = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
    return sum;
}

/* Four 2-bit levels per byte: element l of each 32 in bits 0-1, l+32 in 2-3, and so on. */
static void pack_2bit(const uint8_t L[QK_K], uint8_t qs[QK_K / 4]) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; l++) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
        }
    }
}

/* ---- Q2_K: sixteen groups of 16 on levels 0..3, 4-bit scales and mins */

/* The levels again from the stored d, dmin and 4-bit scales, then packed. */
static void finish_q2_K(const float *x, block_q2_K *y, uint8_t L[QK_K]) {
    const float d_all = llamay_fp16_to_fp32_scalar(y->d);
    const float m_all = llamay_fp16_to_fp32_scalar(y->dmin);
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = d_all * (y->scales[j] & 0xF);
        if (!d) continue;
        const float m = m_all * (y->scales[j] >> 4);
        for (int i = 0; i < 16; i++) {
            L[16 * j + i] = (uint8_t)MAX(0, MIN(3, nearest_int((x[16 * j + i] + m) / d)));
        }
    }
    pack_2bit(L, y->qs);
}

void llamay_quantize_row_q2_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q2_K *y = vy;
    uint8_t L[QK_K];
    float weights[16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f,
                                      0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                y[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            }
            y[i].d = llamay_fp32_to_fp16_scalar(max_scale / 15.f);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = llamay_fp32_to_fp16_scalar(0.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            for (int j = 0; j < QK_K / 16; j++) {
                y[i].scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
            }
            y[i].dmin = llamay_fp32_to_fp16_scalar(max_min / 15.f);
        } else {
            y[i].dmin = llamay_fp32_to_fp16_scalar(0.f);
        }
        finish_q2_K(x, &y[i], L);
    }
}

static void quantize_row_q2_K_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q2_K *y = vy;
    uint8_t L[QK_K], Ls[QK_K / 16], Lm[QK_K / 16];
    float weights[16], sw[QK_K / 16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        const float sigma2 = sum_of_squares(QK_K, x) / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            importance(16, x + 16 * j, qw + 16 * j, sigma2, weights, &sw[j]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.9f,
                                      0.05f, 36, 0);
        }
        const float d = fit_positive_scale(QK_K / 16, 15, scales, Ls, sw);
        const float m = fit_positive_scale(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = llamay_fp32_to_fp16_scalar(d);
        y[i].dmin = llamay_fp32_to_fp16_scalar(m);
        for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        finish_q2_K(x, &y[i], L);
    }
}

/* ---- Q3_K: sixteen groups of 16 on levels -4..3, 6-bit signed scales */

/* Sixteen 6-bit scale levels (0..63) into twelve bytes: low nibbles in the first eight,
   the top two bits of each in the last four. */
static void pack_scales_q3(const int levels[QK_K / 16], uint8_t q[12]) {
    memset(q, 0, 12);
    for (int j = 0; j < QK_K / 16; j++) {
        const int l = levels[j];
        if (j < 8) {
            q[j] = (uint8_t)(l & 0xF);
        } else {
            q[j - 8] |= (uint8_t)((l & 0xF) << 4);
        }
        q[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

static inline int scale_q3(const uint8_t q[12], int j) {
    const int low = j < 8 ? q[j] & 0xF : q[j - 8] >> 4;
    return (int8_t)((low | (((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
}

/* The levels again from the stored d and scales; then the third bits into hmask (element j
   in bit j / 32 of byte j % 32) and the low two bits packed. */
static void finish_q3_K(const float *x, block_q3_K *y, int8_t L[QK_K]) {
    const float d_all = llamay_fp16_to_fp32_scalar(y->d);
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = d_all * scale_q3(y->scales, j);
        if (!d) continue;
        for (int i = 0; i < 16; i++) {
            L[16 * j + i] = (int8_t)(MAX(-4, MIN(3, nearest_int(x[16 * j + i] / d))) + 4);
        }
    }
    uint8_t low[QK_K];
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_K; j++) {
        low[j] = (uint8_t)L[j];
        if (L[j] > 3) {
            y->hmask[j % 32] |= (uint8_t)(1 << (j / 32));
            low[j] -= 4;
        }
    }
    pack_2bit(low, y->qs);
}

void llamay_quantize_row_q3_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q3_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    int levels[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = fit_signed_scale_by_moves(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                const int8_t l = (int8_t)nearest_int(iscale * scales[j]); /* narrowed first */
                levels[j] = MAX(-32, MIN(31, l)) + 32;
            }
            pack_scales_q3(levels, y[i].scales);
            y[i].d = llamay_fp32_to_fp16_scalar(1 / iscale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = llamay_fp32_to_fp16_scalar(0.f);
        }
        finish_q3_K(x, &y[i], L);
    }
}

static void quantize_row_q3_K_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q3_K *y = vy;
    int8_t L[QK_K], Ls[QK_K / 16];
    float weights[16], sw[QK_K / 16], scales[QK_K / 16];
    int levels[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        const float sigma2 = 2 * sum_of_squares(QK_K, x) / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            importance(16, x + 16 * j, qw + 16 * j, sigma2, weights, &sw[j]);
            scales[j] = fit_signed_scale(16, 4, x + 16 * j, weights, L + 16 * j);
        }
        const float d = fit_signed_scale(QK_K / 16, 32, scales, sw, Ls);
        for (int j = 0; j < QK_K / 16; j++) levels[j] = Ls[j];
        pack_scales_q3(levels, y[i].scales);
        y[i].d = llamay_fp32_to_fp16_scalar(d);
        finish_q3_K(x, &y[i], L);
    }
}

/* ---- Q4_K, Q5_K: eight groups of 32 on levels 0..15 (0..31), 6-bit scales and mins */

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

/* Stores the scale and min levels and d, dmin (fp16), then the levels again from the stored
   values. */
static void finish_super_k4(const float *x, int nmax, const uint8_t ls[8], const uint8_t lm[8],
                            float d_all, float dmin_all, uint8_t scales[12], ggml_half *d_out,
                            ggml_half *dmin_out, uint8_t L[QK_K]) {
    pack_scales_k4(ls, lm, scales);
    *d_out = llamay_fp32_to_fp16_scalar(d_all);
    *dmin_out = llamay_fp32_to_fp16_scalar(dmin_all);
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

/* One Q4_K or Q5_K super-block without an importance matrix: each group fitted with weights
   |x| + rms(x), the scales and mins quantized to 6 bits against the largest. */
static void quantize_super_k4(const float *x, int nmax, float rmin, int nstep, uint8_t scales[12],
                              ggml_half *d_out, ggml_half *dmin_out, uint8_t L[QK_K]) {
    float sub_scale[8], sub_min[8], weights[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        sub_scale[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &sub_min[j], rmin,
                                     0.1f, nstep, 0);
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
    finish_super_k4(x, nmax, ls, lm, max_scale / 63.f, max_min / 63.f, scales, d_out, dmin_out, L);
}

/* The same with an importance matrix: groups fitted with importance weights, then the scales
   and mins themselves fitted (each group weighted by its weights' sum). Q5_K clamps their
   levels to 63; Q4_K does not (`clamp`), as in ggml. */
static void quantize_super_k4_weighted(const float *x, const float *qw, int nmax, int clamp,
                                       uint8_t scales[12], ggml_half *d_out, ggml_half *dmin_out,
                                       uint8_t L[QK_K]) {
    float sub_scale[8], sub_min[8], weights[32], sw[8];
    const float sigma2 = 2 * sum_of_squares(QK_K, x) / QK_K;
    for (int j = 0; j < 8; j++) {
        importance(32, x + 32 * j, qw + 32 * j, sigma2, weights, &sw[j]);
        sub_scale[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &sub_min[j],
                                     -0.9f, 0.05f, 36, 0);
    }
    uint8_t ls[8], lm[8];
    const float d = fit_positive_scale(8, 63, sub_scale, ls, sw);
    const float m = fit_positive_scale(8, 63, sub_min, lm, sw);
    if (clamp) {
        for (int j = 0; j < 8; j++) {
            ls[j] = MIN(63, ls[j]);
            lm[j] = MIN(63, lm[j]);
        }
    }
    finish_super_k4(x, nmax, ls, lm, d, m, scales, d_out, dmin_out, L);
}

static void pack_q4_K(const uint8_t L[QK_K], uint8_t *q) {
    for (int j = 0; j < QK_K; j += 64, q += 32) {
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void pack_q5_K(const uint8_t L[QK_K], uint8_t *qh, uint8_t *ql) {
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

void llamay_quantize_row_q4_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_super_k4(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        pack_q4_K(L, y[i].qs);
    }
}

static void quantize_row_q4_K_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        quantize_super_k4_weighted(x, qw, 15, 0, y[i].scales, &y[i].d, &y[i].dmin, L);
        pack_q4_K(L, y[i].qs);
    }
}

void llamay_quantize_row_q5_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_super_k4(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        pack_q5_K(L, y[i].qh, y[i].qs);
    }
}

static void quantize_row_q5_K_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        quantize_super_k4_weighted(x, qw, 31, 1, y[i].scales, &y[i].d, &y[i].dmin, L);
        pack_q5_K(L, y[i].qh, y[i].qs);
    }
}

/* ---- Q6_K: sixteen groups of 16 on levels -32..31, 8-bit signed scales */

/* One super-block: each group's scale fitted (weights x^2, or the importance matrix's `qw`
   as it is, where given), the scales quantized to 8 bits against the largest in magnitude. */
static void quantize_block_q6_K(const float *x, const float *qw, block_q6_K *y) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ib++) {
        scales[ib] = fit_signed_scale(16, 32, x + 16 * ib, qw ? qw + 16 * ib : NULL, L + 16 * ib);
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < 1e-15f) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = llamay_fp32_to_fp16_scalar(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ib++) {
        y->scales[ib] = (int8_t)MIN(127, nearest_int(iscale * scales[ib]));
    }
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = llamay_fp16_to_fp32_scalar(y->d) * y->scales[j];
        if (!d) continue;
        for (int l = 0; l < 16; l++) {
            L[16 * j + l] = (int8_t)(MAX(-32, MIN(31, nearest_int(x[16 * j + l] / d))) + 32);
        }
    }
    uint8_t *ql = y->ql, *qh = y->qh;
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

void llamay_quantize_row_q6_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) {
        quantize_block_q6_K(x + i * QK_K, NULL, y + i);
    }
}

static void quantize_row_q6_K_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) {
        quantize_block_q6_K(x + i * QK_K, qw + i * QK_K, y + i);
    }
}

/* ======================================================================== 32-element types
   with an importance matrix (ggml's quantize_row_q{4,5}_{0,1}_impl): each block fitted with
   importance weights, sigma2 being the mean square of the whole row. */

/* A Q4_0 or Q5_0 block fitted with importance weights: its scale, and L the levels plus
   nmax. */
static float fit_weighted_block(const float *x, const float *qw, float sigma2, int nmax,
                                int8_t L[32]) {
    float weights[32];
    importance(32, x, qw, sigma2, weights, NULL);
    return fit_signed_scale(32, nmax, x, weights, L);
}

/* A Q4_1 or Q5_1 block fitted with importance weights: its scale and min (as stored), and
   L the levels. */
static void fit_weighted_block_min(const float *x, const float *qw, float sigma2, int nmax,
                                   uint8_t L[32], ggml_half *d, ggml_half *m) {
    float weights[32], neg_min;
    importance(32, x, qw, sigma2, weights, NULL);
    const float scale = fit_scale_min(32, nmax, x, weights, L, &neg_min, -0.9f, 0.05f, 36, 0);
    *d = llamay_fp32_to_fp16_scalar(scale);
    *m = llamay_fp32_to_fp16_scalar(-neg_min);
}

static void quantize_row_q4_0_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q4_0 *y = vy;
    const float sigma2 = sum_of_squares(n, x) / n;
    int8_t L[QK4_0];
    for (int64_t ib = 0; ib < n / QK4_0; ib++, x += QK4_0, qw += QK4_0) {
        y[ib].d = llamay_fp32_to_fp16_scalar(fit_weighted_block(x, qw, sigma2, 8, L));
        for (int j = 0; j < QK4_0 / 2; j++) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void quantize_row_q4_1_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q4_1 *y = vy;
    const float sigma2 = sum_of_squares(n, x) / n;
    uint8_t L[QK4_1];
    for (int64_t ib = 0; ib < n / QK4_1; ib++, x += QK4_1, qw += QK4_1) {
        fit_weighted_block_min(x, qw, sigma2, 15, L, &y[ib].d, &y[ib].m);
        for (int j = 0; j < QK4_1 / 2; j++) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void quantize_row_q5_0_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q5_0 *y = vy;
    const float sigma2 = sum_of_squares(n, x) / n;
    int8_t L[QK5_0];
    for (int64_t ib = 0; ib < n / QK5_0; ib++, x += QK5_0, qw += QK5_0) {
        y[ib].d = llamay_fp32_to_fp16_scalar(fit_weighted_block(x, qw, sigma2, 16, L));
        pack_q5((const uint8_t *)L, y[ib].qs, y[ib].qh);
    }
}

static void quantize_row_q5_1_weighted(const float *x, void *vy, int64_t n, const float *qw) {
    block_q5_1 *y = vy;
    const float sigma2 = sum_of_squares(n, x) / n;
    uint8_t L[QK5_1];
    for (int64_t ib = 0; ib < n / QK5_1; ib++, x += QK5_1, qw += QK5_1) {
        fit_weighted_block_min(x, qw, sigma2, 31, L, &y[ib].d, &y[ib].m);
        pack_q5(L, y[ib].qs, y[ib].qh);
    }
}

llamay_weighted_row_fn llamay_weighted_quantizer(int type_id) {
    switch (type_id) {
    case LLAMAY_TYPE_Q4_0: return quantize_row_q4_0_weighted;
    case LLAMAY_TYPE_Q4_1: return quantize_row_q4_1_weighted;
    case LLAMAY_TYPE_Q5_0: return quantize_row_q5_0_weighted;
    case LLAMAY_TYPE_Q5_1: return quantize_row_q5_1_weighted;
    case LLAMAY_TYPE_Q2_K: return quantize_row_q2_K_weighted;
    case LLAMAY_TYPE_Q3_K: return quantize_row_q3_K_weighted;
    case LLAMAY_TYPE_Q4_K: return quantize_row_q4_K_weighted;
    case LLAMAY_TYPE_Q5_K: return quantize_row_q5_K_weighted;
    case LLAMAY_TYPE_Q6_K: return quantize_row_q6_K_weighted;
    default: return NULL; /* Q8_0, MXFP4 and the plain numbers take no weights, as in ggml */
    }
}

/* ======================================================================== MXFP4 */

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

/* ======================================================================== whole rows

   What `llamay quantize` runs: rows of one type turned into rows of another, with or without
   an importance matrix, and the check llama.cpp makes of every tensor it reads and writes. */

/* Elements converted at a time: a quarter of a megabyte of fp32 scratch. */
#define PIECE_ELEMS 65536

int llamay_convert_rows(const llamay_quant_type *from, const void *x, const llamay_quant_type *to,
                        void *y, int64_t n_rows, int64_t n_per_row, const float *imatrix,
                        int set) {
    const llamay_weighted_row_fn weighted = imatrix ? llamay_weighted_quantizer(to->id) : NULL;
    const size_t in_row = (size_t)(n_per_row / from->block_elems * from->block_bytes);
    const size_t out_row = (size_t)(n_per_row / to->block_elems * to->block_bytes);
    const int64_t rows_per_piece = n_per_row >= PIECE_ELEMS ? 1 : PIECE_ELEMS / n_per_row;
    float *scratch = NULL;
    if (from->id != LLAMAY_TYPE_F32) {
        scratch = malloc((size_t)(MIN(rows_per_piece, n_rows) * n_per_row) * sizeof(float));
        if (scratch == NULL) return -1;
    }
    for (int64_t r = 0; r < n_rows; r += rows_per_piece) {
        const int64_t k = MIN(rows_per_piece, n_rows - r);
        const uint8_t *src = (const uint8_t *)x + (size_t)r * in_row;
        uint8_t *dst = (uint8_t *)y + (size_t)r * out_row;
        const float *values = (const float *)src;
        if (scratch != NULL) {
            from->to_float[set](src, scratch, k * n_per_row);
            values = scratch;
        }
        if (weighted != NULL) {
            for (int64_t i = 0; i < k; i++) {
                weighted(values + i * n_per_row, dst + (size_t)i * out_row, n_per_row, imatrix);
            }
        } else {
            to->from_float[set](values, dst, k * n_per_row);
        }
    }
    free(scratch);
    return 0;
}

static inline int half_not_finite(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return (h & 0x7C00) == 0x7C00;
}

/* Where each block format keeps its fp16 scales (up to two). */
static int half_fields(int type_id, size_t offsets[2]) {
#define FIELDS(block, ...)                                                                        \
    do {                                                                                          \
        const size_t list[] = {__VA_ARGS__};                                                      \
        memcpy(offsets, list, sizeof list);                                                       \
        return (int)(sizeof list / sizeof list[0]);                                               \
    } while (0)
    switch (type_id) {
    case LLAMAY_TYPE_Q4_0: FIELDS(block_q4_0, offsetof(block_q4_0, d));
    case LLAMAY_TYPE_Q4_1: FIELDS(block_q4_1, offsetof(block_q4_1, d), offsetof(block_q4_1, m));
    case LLAMAY_TYPE_Q5_0: FIELDS(block_q5_0, offsetof(block_q5_0, d));
    case LLAMAY_TYPE_Q5_1: FIELDS(block_q5_1, offsetof(block_q5_1, d), offsetof(block_q5_1, m));
    case LLAMAY_TYPE_Q8_0: FIELDS(block_q8_0, offsetof(block_q8_0, d));
    case LLAMAY_TYPE_Q2_K:
        FIELDS(block_q2_K, offsetof(block_q2_K, d), offsetof(block_q2_K, dmin));
    case LLAMAY_TYPE_Q3_K: FIELDS(block_q3_K, offsetof(block_q3_K, d));
    case LLAMAY_TYPE_Q4_K:
        FIELDS(block_q4_K, offsetof(block_q4_K, d), offsetof(block_q4_K, dmin));
    case LLAMAY_TYPE_Q5_K:
        FIELDS(block_q5_K, offsetof(block_q5_K, d), offsetof(block_q5_K, dmin));
    case LLAMAY_TYPE_Q6_K: FIELDS(block_q6_K, offsetof(block_q6_K, d));
    case LLAMAY_TYPE_TQ1_0: FIELDS(block_tq1_0, offsetof(block_tq1_0, d));
    case LLAMAY_TYPE_TQ2_0: FIELDS(block_tq2_0, offsetof(block_tq2_0, d));
    case LLAMAY_TYPE_Q1_0: FIELDS(block_q1_0, offsetof(block_q1_0, d));
    case LLAMAY_TYPE_IQ2_XXS:
    case LLAMAY_TYPE_IQ2_XS:
    case LLAMAY_TYPE_IQ2_S:
    case LLAMAY_TYPE_IQ3_XXS:
    case LLAMAY_TYPE_IQ3_S:
    case LLAMAY_TYPE_IQ1_S:
    case LLAMAY_TYPE_IQ4_NL:
    case LLAMAY_TYPE_IQ4_XS: FIELDS(any, 0); /* each begins with its fp16 d */
    default: return 0;
    }
#undef FIELDS
}

int64_t llamay_first_invalid_block(int type_id, const void *data, int64_t n_blocks) {
    const llamay_quant_type *t = llamay_ggml_type(type_id);
    const uint8_t *p = data;
    switch (type_id) {
    case LLAMAY_TYPE_F16:
        for (int64_t i = 0; i < n_blocks; i++) {
            if (half_not_finite(p + 2 * i)) return i;
        }
        return -1;
    case LLAMAY_TYPE_BF16:
        for (int64_t i = 0; i < n_blocks; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h);
            if ((h & 0x7FFF) >= 0x7F80) return i;
        }
        return -1;
    case LLAMAY_TYPE_F32:
    case LLAMAY_TYPE_Q8_K: /* its scale is the block's first four bytes, an fp32 */
        for (int64_t i = 0; i < n_blocks; i++) {
            uint32_t u;
            memcpy(&u, p + (size_t)i * t->block_bytes, sizeof u);
            if ((u & 0x7F800000) == 0x7F800000) return i;
        }
        return -1;
    case LLAMAY_TYPE_F64:
        for (int64_t i = 0; i < n_blocks; i++) {
            uint64_t u;
            memcpy(&u, p + 8 * i, sizeof u);
            if ((u & 0x7FF0000000000000ull) == 0x7FF0000000000000ull) return i;
        }
        return -1;
    case LLAMAY_TYPE_MXFP4: /* an E8M0 exponent of 255 is NaN */
        for (int64_t i = 0; i < n_blocks; i++) {
            if (p[(size_t)i * t->block_bytes] == 0xFF) return i;
        }
        return -1;
    default: break;
    }
    size_t offsets[2];
    const int n_fields = half_fields(type_id, offsets);
    for (int64_t i = 0; i < n_blocks && n_fields > 0; i++) {
        for (int f = 0; f < n_fields; f++) {
            if (half_not_finite(p + (size_t)i * t->block_bytes + offsets[f])) return i;
        }
    }
    return -1;
}
