/* Quantizers: fp32 -> ggml blocks, bit-exact with ggml's reference quantizers
   (quantize_row_*_ref in ggml-quants.c), for the formats llamay writes or uses for activations.

   Rounding differs by format, as in ggml: Q4_0..Q5_1 truncate x + 0.5 (after an offset), Q8_0
   uses roundf (halves away from zero), Q8_K the float-magic nearest_int (halves to even). The
   SIMD versions (`_avx2`, chosen per kernel set by quants.c's table) reproduce the scalar ones
   exactly, ties included; a block holding an inf or NaN, or so close to zero that its inverse
   scale overflows, goes through the scalar code, whose behaviour there the SIMD code does not
   try to imitate. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fp16.h"
#include "quants.h"

#if LLAMAY_HAVE_AVX2
#include <immintrin.h>
#endif

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

#if LLAMAY_HAVE_AVX2
void llamay_quantize_row_f16_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    ggml_half *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++) {
        y[i] = llamay_fp32_to_fp16(x[i]);
    }
}
#endif

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

#if LLAMAY_HAVE_AVX2
static inline __m256 abs_ps(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* The largest |x| of 8 * n_vec finite floats, or -1 if any is inf or NaN. */
static inline float absmax_if_finite(const float *x, int n_vec) {
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 amax = _mm256_setzero_ps();
    __m256 not_finite = _mm256_setzero_ps();
    for (int k = 0; k < n_vec; k++) {
        const __m256 a = abs_ps(_mm256_loadu_ps(x + 8 * k));
        amax = _mm256_max_ps(amax, a);
        not_finite = _mm256_or_ps(not_finite, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
    }
    return _mm256_movemask_ps(not_finite) ? -1.0f : hmax_ps(amax);
}

/* roundf, eight at a time: truncate, then step away from zero where the dropped part is
   at least one half. Exact for |v| < 2^23, where v - trunc(v) is representable. */
static inline __m256i roundf_epi32(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 dropped = abs_ps(_mm256_sub_ps(v, t));
    const __m256 away = _mm256_cmp_ps(dropped, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(away, step)));
}

/* Thirty-two int32 in [-128, 127], in order, as int8. */
static inline __m256i pack_epi32_to_epi8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    /* in fours, per 128-bit lane: a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    const __m256i packed = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void llamay_quantize_row_q8_0_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float amax = absmax_if_finite(x, QK8_0 / 8);
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        if (amax < 0 || isinf(id)) {
            quantize_block_q8_0_ref(x, y + i);
            continue;
        }
        y[i].d = llamay_fp32_to_fp16(d);
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            q[k] = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), idv));
        }
        _mm256_storeu_si256((__m256i *)y[i].qs, pack_epi32_to_epi8(q[0], q[1], q[2], q[3]));
    }
}
#endif

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

#if LLAMAY_HAVE_AVX2
/* The first of 8 * n_vec floats whose magnitude is amax (which one of them is). */
static inline float first_with_magnitude(const float *x, int n_vec, float amax) {
    const __m256 target = _mm256_set1_ps(amax);
    for (int k = 0; k < n_vec; k++) {
        const __m256 v = _mm256_loadu_ps(x + 8 * k);
        const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(v), target, _CMP_EQ_OQ));
        if (hits) {
            return x[8 * k + __builtin_ctz(hits)];
        }
    }
    return 0.0f; /* unreachable: amax is one of the magnitudes */
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

void llamay_quantize_row_q8_K_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 magic = _mm256_set1_ps(12582912.f);
    const __m256i mantissa = _mm256_set1_epi32(0x007FFFFF), bias = _mm256_set1_epi32(0x00400000);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float amax = absmax_if_finite(x, QK_K / 8);
        if (amax <= 0) { /* not finite (-1), or all zero: the scalar code is quick there */
            quantize_block_q8_K_ref(x, y + i);
            continue;
        }
        const float iscale = -127.f / first_with_magnitude(x, QK_K / 8, amax);
        if (isinf(iscale)) {
            quantize_block_q8_K_ref(x, y + i);
            continue;
        }
        const __m256 iscalev = _mm256_set1_ps(iscale);
        for (int c = 0; c < QK_K / 32; c++) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * k), iscalev);
                const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, magic));
                q[k] = _mm256_sub_epi32(_mm256_and_si256(bits, mantissa), bias);
                q[k] = _mm256_min_epi32(q[k], _mm256_set1_epi32(127));
            }
            y[i].bsums[2 * c] = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
            y[i].bsums[2 * c + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
            const __m256i packed = pack_epi32_to_epi8(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * c), packed);
        }
        y[i].d = 1 / iscale;
    }
}
#endif
