/* The AVX2 dequantizers of the hot formats (quants.c's table gives them to the AVX2 and AVX-512
   kernel sets): each computes every element with the very operations of its `_ref` in
   dequantize.c, only eight at a time, so the results are the same bits. Compiled with the AVX2
   set's flags (setup.py); elsewhere, or in a build without the set, it is empty. */
#include "kernel_set.h"

#if LLAMAY_WITH_AVX2
#if !LLAMAY_TARGETS_AVX2
#error "dequantize_avx2.c is compiled with the AVX2 set's flags (setup.py)"
#endif

#include <immintrin.h>
#include <string.h>

#include "fp16.h"
#include "quants.h"

/* The low eight bytes of q, as int8 or uint8, converted to fp32. */
static inline __m256 i8x8_to_ps(__m128i q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
}

static inline __m256 u8x8_to_ps(__m128i q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
}

/* Thirty-two int8 q into y: the first 16 times scale0, the last 16 times scale1. */
static inline void store_scaled_i8x32(float *y, __m256i q, __m256 scale0, __m256 scale1) {
    const __m128i first = _mm256_castsi256_si128(q), last = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(i8x8_to_ps(first), scale0));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(first, 8)), scale0));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(i8x8_to_ps(last), scale1));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(last, 8)), scale1));
}

/* The 32 four-bit values of a Q4_0-style nibble array: low nibbles, then high nibbles. */
static inline __m256i unpack_nibbles_32(const uint8_t *qs) {
    const __m128i packed = _mm_loadu_si128((const __m128i *)qs);
    const __m128i low = _mm_and_si128(packed, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
    return _mm256_set_m128i(high, low);
}

/* Byte j is 0xFF where bit j of the little-endian uint32 at p is set, else 0. */
static inline __m256i expand_bits_32(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, sizeof bits);
    const __m256i byte_of_bit = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                  0x0101010101010101, 0x0000000000000000);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), byte_of_bit);
    const __m256i bit_of_byte = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_of_byte), bit_of_byte);
}

/* Thirty-two small non-negative bytes q, as d * q - m, into y. */
static inline void store_affine_u8x32(float *y, __m256i q, float d, float m) {
    const __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
    const __m128i first = _mm256_castsi256_si128(q), last = _mm256_extracti128_si256(q, 1);
    const __m256 v[4] = {u8x8_to_ps(first), u8x8_to_ps(_mm_srli_si128(first, 8)),
                         u8x8_to_ps(last), u8x8_to_ps(_mm_srli_si128(last, 8))};
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dv, v[k]), mv));
    }
}


void llamay_dequantize_row_f16_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const ggml_half *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    }
    for (; i < n; i++) {
        y[i] = llamay_fp16_to_fp32(x[i]);
    }
}

void llamay_dequantize_row_q5_0_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const __m256 d = _mm256_set1_ps(llamay_fp16_to_fp32(x[i].d));
        const __m256i high_bit = _mm256_and_si256(expand_bits_32(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles_32(x[i].qs), high_bit),
                                          _mm256_set1_epi8(16));
        store_scaled_i8x32(y + i * QK5_0, q, d, d);
    }
}

void llamay_dequantize_row_q8_0_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m256 d = _mm256_set1_ps(llamay_fp16_to_fp32(x[i].d));
        store_scaled_i8x32(y + i * QK8_0, _mm256_loadu_si256((const __m256i *)x[i].qs), d, d);
    }
}

void llamay_dequantize_row_q4_K_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_K *x = vx;
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32(x[i].d);
        const float min = llamay_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
            int sc, m;
            const __m256i packed = _mm256_loadu_si256((const __m256i *)q);
            llamay_q4_K_scale_min(x[i].scales, is, &sc, &m);
            store_affine_u8x32(y, _mm256_and_si256(packed, low_nibble), d * sc, min * m);
            llamay_q4_K_scale_min(x[i].scales, is + 1, &sc, &m);
            store_affine_u8x32(y + 32, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble),
                               d * sc, min * m);
        }
    }
}

void llamay_dequantize_row_q6_K_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q6_K *x = vx;
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i bits_4_5 = _mm256_set1_epi8(0x30);
    const __m256i offset = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            /* the four 32-element quarters of these 128 take, in order: the low nibbles of
               ql[0..31], of ql[32..63], the high nibbles of each, with qh's bit pairs 0-1, 2-3,
               4-5, 6-7 above them (moved to bits 4-5 by 16-bit shifts, then masked per byte) */
            const __m256i ql_a = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i ql_b = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i high = _mm256_loadu_si256((const __m256i *)qh);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql_a, low_nibble),
                                _mm256_and_si256(_mm256_slli_epi16(high, 4), bits_4_5)),
                _mm256_or_si256(_mm256_and_si256(ql_b, low_nibble),
                                _mm256_and_si256(_mm256_slli_epi16(high, 2), bits_4_5)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_a, 4), low_nibble),
                                _mm256_and_si256(high, bits_4_5)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_b, 4), low_nibble),
                                _mm256_and_si256(_mm256_srli_epi16(high, 2), bits_4_5)),
            };
            for (int k = 0; k < 4; k++) {
                const __m256 scale0 = _mm256_set1_ps(d * sc[2 * k]);
                const __m256 scale1 = _mm256_set1_ps(d * sc[2 * k + 1]);
                store_scaled_i8x32(y + 32 * k, _mm256_sub_epi8(q[k], offset), scale0, scale1);
            }
        }
    }
}

#endif
