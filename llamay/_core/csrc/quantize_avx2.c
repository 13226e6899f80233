/* The AVX2 quantizers of the formats activations take (quants.c's table gives them to the AVX2
   and AVX-512 kernel sets): the same bits as their `_ref` in quantize.c, ties included. A block
   holding an inf or NaN, or so close to zero that its inverse scale overflows, goes through the
   scalar code. Compiled with the AVX2 set's flags (setup.py); elsewhere, or in a build without
   the set, it is empty. */
#include "kernel_set.h"

#if LLAMAY_WITH_AVX2
#if !LLAMAY_TARGETS_AVX2
#error "quantize_avx2.c is compiled with the AVX2 set's flags (setup.py)"
#endif

#include <immintrin.h>
#include <math.h>

#include "fp16.h"
#include "quants.h"

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
            llamay_quantize_row_q8_0_ref(x, y + i, QK8_0);
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
            llamay_quantize_row_q8_K_ref(x, y + i, QK_K);
            continue;
        }
        const float iscale = -127.f / first_with_magnitude(x, QK_K / 8, amax);
        if (isinf(iscale)) {
            llamay_quantize_row_q8_K_ref(x, y + i, QK_K);
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
