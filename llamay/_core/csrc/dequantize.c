/* Dequantizers: ggml blocks -> fp32.

   Each `_ref` function is the scalar reference, written after ggml-quants.c and doing the same
   fp32 operations in the same order (the build has no fast-math and no FMA contraction), so its
   results are ggml's bit for bit. The hot formats also have an AVX2 version (`_avx2`, which
   quants.c's table gives the AVX2 and AVX-512 kernel sets) that computes each element with
   the very same operations, only eight at a time. */
#include <string.h>

#include "fp16.h"
#include "iq_tables.h"
#include "quants.h"

#if LLAMAY_HAVE_AVX2
#include <immintrin.h>
#endif

static const uint8_t kmask_iq2xs[8] = {1, 2, 4, 8, 16, 32, 64, 128};

/* ======================================================================== SIMD helpers */

#if LLAMAY_HAVE_AVX2
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

#endif

/* ======================================================================== plain numbers */

void llamay_dequantize_row_f32_ref(const void *restrict vx, float *restrict y, int64_t n) {
    memcpy(y, vx, (size_t)n * sizeof(float));
}

void llamay_dequantize_row_f16_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const ggml_half *x = vx;
    for (int64_t i = 0; i < n; i++) {
        y[i] = llamay_fp16_to_fp32_scalar(x[i]);
    }
}

#if LLAMAY_HAVE_AVX2
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
#endif

void llamay_dequantize_row_bf16_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) {
        y[i] = llamay_bf16_to_fp32(x[i]);
    }
}

/* Integer and fp64 tensors convert to the nearest fp32, as a C cast (and numpy's astype) does. */
#define CONVERT_ROW(name, ctype)                                                              \
    void llamay_dequantize_row_##name##_ref(const void *restrict vx, float *restrict y,     \
                                            int64_t n) {                                     \
        const ctype *x = vx;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                    \
            y[i] = (float)x[i];                                                              \
        }                                                                                    \
    }
CONVERT_ROW(i8, int8_t)
CONVERT_ROW(i16, int16_t)
CONVERT_ROW(i32, int32_t)
CONVERT_ROW(i64, int64_t)
CONVERT_ROW(f64, double)
#undef CONVERT_ROW

/* ======================================================================== 32-element blocks */

void llamay_dequantize_row_q4_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * QK4_0 + j] = x0 * d;
            y[i * QK4_0 + j + QK4_0 / 2] = x1 * d;
        }
    }
}

void llamay_dequantize_row_q4_1_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float m = llamay_fp16_to_fp32_scalar(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int x0 = x[i].qs[j] & 0x0F;
            const int x1 = x[i].qs[j] >> 4;
            y[i * QK4_1 + j] = x0 * d + m;
            y[i * QK4_1 + j + QK4_1 / 2] = x1 * d + m;
        }
    }
}

void llamay_dequantize_row_q5_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = ((x[i].qs[j] & 0x0F) | xh0) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | xh1) - 16;
            y[i * QK5_0 + j] = x0 * d;
            y[i * QK5_0 + j + QK5_0 / 2] = x1 * d;
        }
    }
}

#if LLAMAY_HAVE_AVX2
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
#endif

void llamay_dequantize_row_q5_1_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float m = llamay_fp16_to_fp32_scalar(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (x[i].qs[j] & 0x0F) | xh0;
            const int x1 = (x[i].qs[j] >> 4) | xh1;
            y[i * QK5_1 + j] = x0 * d + m;
            y[i * QK5_1 + j + QK5_1 / 2] = x1 * d + m;
        }
    }
}

void llamay_dequantize_row_q8_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK8_0; j++) {
            y[i * QK8_0 + j] = x[i].qs[j] * d;
        }
    }
}

#if LLAMAY_HAVE_AVX2
void llamay_dequantize_row_q8_0_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m256 d = _mm256_set1_ps(llamay_fp16_to_fp32(x[i].d));
        store_scaled_i8x32(y + i * QK8_0, _mm256_loadu_si256((const __m256i *)x[i].qs), d, d);
    }
}
#endif

void llamay_dequantize_row_iq4_nl_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[i * QK4_NL + j] = d * kvalues_iq4nl[x[i].qs[j] & 0x0F];
            y[i * QK4_NL + j + QK4_NL / 2] = d * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

/* An E8M0 exponent as 2^(e-127) / 2, the half matching the doubled kvalues_mxfp4. */
static inline float e8m0_to_fp32_half(uint8_t e) {
    return llamay_f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

void llamay_dequantize_row_mxfp4_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const float d = e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[i * QK_MXFP4 + j] = kvalues_mxfp4[x[i].qs[j] & 0x0F] * d;
            y[i * QK_MXFP4 + j + QK_MXFP4 / 2] = kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}

/* An unsigned E4M3 scale (bias 7, no sign; 0x7F, its NaN, reads as 0), halved like E8M0's. */
static inline float ue4m3_to_fp32_half(uint8_t u) {
    if (u == 0 || u == 0x7F) {
        return 0.0f;
    }
    const uint32_t exponent = (u >> 3) & 0x0F;
    const uint32_t mantissa = u & 0x07;
    if (exponent == 0) {
        return (float)mantissa * 0x1p-10f;
    }
    return llamay_f32_from_bits(((exponent - 7 - 1 + 127) << 23) | (mantissa << 20));
}

void llamay_dequantize_row_nvfp4_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_nvfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_NVFP4; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++) {
            const float d = ue4m3_to_fp32_half(x[i].d[s]);
            const uint8_t *qs = x[i].qs + s * (QK_NVFP4_SUB / 2);
            float *ys = y + i * QK_NVFP4 + s * QK_NVFP4_SUB;
            for (int j = 0; j < QK_NVFP4_SUB / 2; j++) {
                ys[j] = kvalues_mxfp4[qs[j] & 0x0F] * d;
                ys[j + QK_NVFP4_SUB / 2] = kvalues_mxfp4[qs[j] >> 4] * d;
            }
        }
    }
}

void llamay_dequantize_row_q1_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q1_0 *x = vx;
    for (int64_t i = 0; i < n / QK1_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK1_0; j++) {
            y[i * QK1_0 + j] = (x[i].qs[j / 8] >> (j % 8)) & 1 ? d : -d;
        }
    }
}

/* ======================================================================== K-quants */

void llamay_dequantize_row_q2_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float min = llamay_fp16_to_fp32_scalar(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0x0F);
                    const float ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) {
                        *y++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
                    }
                }
            }
        }
    }
}

/* The sixteen 6-bit scales of a Q3_K block, unpacked as signed bytes still offset by 32. */
static inline void q3_K_scales(const uint8_t packed[12], int8_t scales[16]) {
    for (int j = 0; j < 16; j++) {
        const int low = (packed[j % 8] >> (4 * (j / 8))) & 0x0F;
        const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        scales[j] = (int8_t)(low | (high << 4));
    }
}

void llamay_dequantize_row_q3_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = llamay_fp16_to_fp32_scalar(x[i].d);
        int8_t scales[16];
        q3_K_scales(x[i].scales, scales);
        const uint8_t *q = x[i].qs;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; part++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        const int low = (q[l] >> shift) & 3;
                        *y++ = dl * (low - (x[i].hmask[l] & m ? 0 : 4));
                    }
                }
            }
        }
    }
}

/* Scale and min j (of 8) of a Q4_K/Q5_K block: 6 bits each, packed in 12 bytes. */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *scale, uint8_t *min) {
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

void llamay_dequantize_row_q4_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float min = llamay_fp16_to_fp32_scalar(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

#if LLAMAY_HAVE_AVX2
void llamay_dequantize_row_q4_K_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_K *x = vx;
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32(x[i].d);
        const float min = llamay_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
            uint8_t sc, m;
            const __m256i packed = _mm256_loadu_si256((const __m256i *)q);
            scale_min_k4(is, x[i].scales, &sc, &m);
            store_affine_u8x32(y, _mm256_and_si256(packed, low_nibble), d * sc, min * m);
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            store_affine_u8x32(y + 32, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble),
                               d * sc, min * m);
        }
    }
}
#endif

void llamay_dequantize_row_q5_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float min = llamay_fp16_to_fp32_scalar(x[i].dmin);
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0x0F) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void llamay_dequantize_row_q6_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

#if LLAMAY_HAVE_AVX2
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

void llamay_dequantize_row_q8_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int j = 0; j < QK_K; j++) {
            y[i * QK_K + j] = x[i].d * x[i].qs[j];
        }
    }
}

/* ======================================================================== IQ formats */

void llamay_dequantize_row_iq2_xxs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq2_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            uint32_t aux[2]; /* 4 grid indices; 4 x 7 sign bits and a 4-bit scale */
            memcpy(aux, x[i].qs + 4 * ib32, sizeof aux);
            const uint8_t *index = (const uint8_t *)aux;
            const float db = d * (0.5f + (aux[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t *grid = (const uint8_t *)(iq2xxs_grid + index[l]);
                const uint8_t signs = ksigns_iq2xs[(aux[1] >> (7 * l)) & 127];
                for (int j = 0; j < 8; j++) {
                    y[j] = db * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq2_xs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq2_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            const float db[2] = {
                d * (0.5f + (x[i].scales[ib32] & 0x0F)) * 0.25f,
                d * (0.5f + (x[i].scales[ib32] >> 4)) * 0.25f,
            };
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = x[i].qs[4 * ib32 + l];
                const uint8_t *grid = (const uint8_t *)(iq2xs_grid + (q & 511));
                const uint8_t signs = ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++) {
                    y[j] = db[l / 2] * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq2_s_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq2_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *signs = x[i].qs + QK_K / 8;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 4, signs += 4) {
            const float db[2] = {
                d * (0.5f + (x[i].scales[ib32] & 0x0F)) * 0.25f,
                d * (0.5f + (x[i].scales[ib32] >> 4)) * 0.25f,
            };
            for (int l = 0; l < 4; l++, y += 8) {
                const int index = qs[l] | ((x[i].qh[ib32] << (8 - 2 * l)) & 0x300);
                const uint8_t *grid = (const uint8_t *)(iq2s_grid + index);
                for (int j = 0; j < 8; j++) {
                    y[j] = db[l / 2] * grid[j] * (signs[l] & kmask_iq2xs[j] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq3_xxs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq3_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *scales_and_signs = x[i].qs + QK_K / 4;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8) {
            uint32_t aux;
            memcpy(&aux, scales_and_signs + 4 * ib32, sizeof aux);
            const float db = d * (0.5f + (aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
                const uint8_t *grid1 = (const uint8_t *)(iq3xxs_grid + qs[2 * l]);
                const uint8_t *grid2 = (const uint8_t *)(iq3xxs_grid + qs[2 * l + 1]);
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid1[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
                    y[j + 4] = db * grid2[j] * (signs & kmask_iq2xs[j + 4] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq3_s_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq3_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *signs = x[i].signs;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8, signs += 4) {
            const uint8_t sc = x[i].scales[ib32 / 2];
            const float db = d * (1 + 2 * (ib32 % 2 ? sc >> 4 : sc & 0x0F));
            const uint8_t qh = x[i].qh[ib32];
            for (int l = 0; l < 4; l++, y += 8) {
                const int index1 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
                const int index2 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
                const uint8_t *grid1 = (const uint8_t *)(iq3s_grid + index1);
                const uint8_t *grid2 = (const uint8_t *)(iq3s_grid + index2);
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid1[j] * (signs[l] & kmask_iq2xs[j] ? -1.f : 1.f);
                    y[j + 4] = db * grid2[j] * (signs[l] & kmask_iq2xs[j + 4] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq4_xs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) |
                           (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0x0F];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* ======================================================================== ternary */

/* Ternary digit of a byte that holds them as a base-3 fraction: the top digit of q * 3 / 256. */
static inline int top_trit(uint8_t q) {
    return ((uint16_t)q * 3) >> 8;
}

void llamay_dequantize_row_tq1_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const block_tq1_0 *x = vx;
    const int n_qs = (int)sizeof x->qs;
    const int qs_in_32s = n_qs - n_qs % 32;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < qs_in_32s; j += 32) {
            for (int t = 0; t < 5; t++) {
                for (int m = 0; m < 32; m++) {
                    *y++ = (float)(top_trit((uint8_t)(x[i].qs[j + m] * pow3[t])) - 1) * d;
                }
            }
        }
        for (int j = qs_in_32s; j < n_qs; j += 16) {
            for (int t = 0; t < 5; t++) {
                for (int m = 0; m < 16; m++) {
                    *y++ = (float)(top_trit((uint8_t)(x[i].qs[j + m] * pow3[t])) - 1) * d;
                }
            }
        }
        for (int t = 0; t < 4; t++) {
            for (int j = 0; j < (int)sizeof x->qh; j++) {
                *y++ = (float)(top_trit((uint8_t)(x[i].qh[j] * pow3[t])) - 1) * d;
            }
        }
    }
}

void llamay_dequantize_row_tq2_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_tq2_0 *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < (int)sizeof x->qs; j += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int m = 0; m < 32; m++) {
                    *y++ = (float)(((x[i].qs[j + m] >> shift) & 3) - 1) * d;
                }
            }
        }
    }
}
