/* Sixteen fp32 lanes, four ways: plain C (the reference), AVX2 (two 8-lane registers),
   AVX-512 (one register) and NEON (four 4-lane registers).

   The engine's elementwise and reduction kernels (kernels_body.h) are written once against
   these operations and compiled once per implementation. Each operation is the same IEEE
   operation on every lane in every implementation (fmaf is fused in all four, max/min follow
   x86's `a > b ? a : b`, reductions use one fixed tree), so the four builds of a kernel give
   the same bits by construction; tests check it.

   Include with LLAMAY_VEC set to LLAMAY_VEC_REF, LLAMAY_VEC_AVX2, LLAMAY_VEC_AVX512 or
   LLAMAY_VEC_NEON. */
#ifndef LLAMAY_VEC16_H
#define LLAMAY_VEC16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fp16.h"

#define LLAMAY_VEC_REF 0
#define LLAMAY_VEC_AVX2 1
#define LLAMAY_VEC_AVX512 2
#define LLAMAY_VEC_NEON 3

#define V16_INLINE static inline __attribute__((always_inline))

#if LLAMAY_VEC == LLAMAY_VEC_REF
/* ---- plain C ---- */

typedef struct {
    float f[16];
} v16;
typedef struct {
    unsigned char b[16];
} m16;

#define V16_MAP(expr)                                                                          \
    v16 r;                                                                                     \
    for (int i = 0; i < 16; i++) r.f[i] = (expr);                                              \
    return r

V16_INLINE v16 v16_set1(float x) { V16_MAP(x); }
V16_INLINE v16 v16_zero(void) { return v16_set1(0.0f); }
V16_INLINE v16 v16_load(const float *p) { V16_MAP(p[i]); }
V16_INLINE void v16_store(float *p, v16 a) { memcpy(p, a.f, sizeof a.f); }
V16_INLINE v16 v16_load_f16(const uint16_t *p) { V16_MAP(llamay_fp16_to_fp32_scalar(p[i])); }
V16_INLINE v16 v16_load_i8(const int8_t *p) { V16_MAP((float)p[i]); }
/* lanes [0, n) from p, zeros in the rest (n <= 16) */
V16_INLINE v16 v16_load_partial(const float *p, int n) { V16_MAP(i < n ? p[i] : 0.0f); }
V16_INLINE void v16_store_partial(float *p, v16 a, int n) { memcpy(p, a.f, (size_t)n * 4); }
V16_INLINE v16 v16_add(v16 a, v16 b) { V16_MAP(a.f[i] + b.f[i]); }
V16_INLINE v16 v16_sub(v16 a, v16 b) { V16_MAP(a.f[i] - b.f[i]); }
V16_INLINE v16 v16_mul(v16 a, v16 b) { V16_MAP(a.f[i] * b.f[i]); }
V16_INLINE v16 v16_div(v16 a, v16 b) { V16_MAP(a.f[i] / b.f[i]); }
V16_INLINE v16 v16_fma(v16 a, v16 b, v16 c) { V16_MAP(fmaf(a.f[i], b.f[i], c.f[i])); }
V16_INLINE v16 v16_max(v16 a, v16 b) { V16_MAP(a.f[i] > b.f[i] ? a.f[i] : b.f[i]); }
V16_INLINE v16 v16_min(v16 a, v16 b) { V16_MAP(a.f[i] < b.f[i] ? a.f[i] : b.f[i]); }
V16_INLINE v16 v16_abs(v16 a) {
    V16_MAP(llamay_f32_from_bits(llamay_f32_bits(a.f[i]) & 0x7FFFFFFFu));
}
/* |mag| with the sign of sign */
V16_INLINE v16 v16_copysign(v16 mag, v16 sign) {
    V16_MAP(llamay_f32_from_bits((llamay_f32_bits(mag.f[i]) & 0x7FFFFFFFu) |
                                 (llamay_f32_bits(sign.f[i]) & 0x80000000u)));
}
/* 2^n for lanes holding integers in [-127, 127] (2^-127 gives +0) */
V16_INLINE v16 v16_exp2i(v16 n) {
    V16_MAP(llamay_f32_from_bits(((uint32_t)((int32_t)n.f[i] + 127) & 0xFFu) << 23));
}
V16_INLINE m16 v16_lt(v16 a, v16 b) {
    m16 m;
    for (int i = 0; i < 16; i++) m.b[i] = a.f[i] < b.f[i];
    return m;
}
V16_INLINE v16 v16_select(m16 m, v16 if_true, v16 if_false) {
    V16_MAP(m.b[i] ? if_true.f[i] : if_false.f[i]);
}
/* (lane i + lane i+8), then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)): matmul.h's tree */
V16_INLINE float v16_tree(v16 a) {
    float s[8];
    for (int i = 0; i < 8; i++) s[i] = a.f[i] + a.f[i + 8];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}
/* out[r] = v16_tree(x[r]) * scale for eight rows, in two parts: v16_tree8_first of rows r and
   r + 4 as soon as they are summed, v16_tree8_rest once all four pairs (r = 0..3) are. Here the
   first part only holds the two rows. */
typedef struct {
    v16 row, row_4;
} v16_tree_pair;
V16_INLINE v16_tree_pair v16_tree8_first(v16 row, v16 row_4) {
    return (v16_tree_pair){row, row_4};
}
V16_INLINE void v16_tree8_rest(const v16_tree_pair *u, float scale, float *out) {
    for (int r = 0; r < 4; r++) {
        out[r] = v16_tree(u[r].row) * scale;
        out[r + 4] = v16_tree(u[r].row_4) * scale;
    }
}
V16_INLINE float v16_hmax(v16 a) {
    float m = a.f[0];
    for (int i = 1; i < 16; i++) m = a.f[i] > m ? a.f[i] : m;
    return m;
}
#undef V16_MAP

#elif LLAMAY_VEC == LLAMAY_VEC_AVX2
/* ---- AVX2 + FMA + F16C: lanes 0-7 in lo, 8-15 in hi ---- */
#include <immintrin.h>

typedef struct {
    __m256 lo, hi;
} v16;
typedef struct {
    __m256 lo, hi;
} m16;

V16_INLINE v16 v16_pair(__m256 lo, __m256 hi) {
    v16 r = {lo, hi};
    return r;
}
V16_INLINE v16 v16_set1(float x) { return v16_pair(_mm256_set1_ps(x), _mm256_set1_ps(x)); }
V16_INLINE v16 v16_zero(void) { return v16_pair(_mm256_setzero_ps(), _mm256_setzero_ps()); }
V16_INLINE v16 v16_load(const float *p) {
    return v16_pair(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
}
V16_INLINE void v16_store(float *p, v16 a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
}
V16_INLINE v16 v16_load_f16(const uint16_t *p) {
    return v16_pair(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)),
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8))));
}
/* each half from its own eight bytes, so that a caller using one half loads only those */
V16_INLINE v16 v16_load_i8(const int8_t *p) {
    return v16_pair(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))),
                    _mm256_cvtepi32_ps(
                        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8)))));
}
#define V16_BINARY(name, op)                                                                   \
    V16_INLINE v16 name(v16 a, v16 b) { return v16_pair(op(a.lo, b.lo), op(a.hi, b.hi)); }
V16_BINARY(v16_add, _mm256_add_ps)
V16_BINARY(v16_sub, _mm256_sub_ps)
V16_BINARY(v16_mul, _mm256_mul_ps)
V16_BINARY(v16_div, _mm256_div_ps)
V16_BINARY(v16_max, _mm256_max_ps)
V16_BINARY(v16_min, _mm256_min_ps)
#undef V16_BINARY
V16_INLINE v16 v16_fma(v16 a, v16 b, v16 c) {
    return v16_pair(_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi));
}
V16_INLINE v16 v16_abs(v16 a) {
    const __m256 m = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    return v16_pair(_mm256_and_ps(a.lo, m), _mm256_and_ps(a.hi, m));
}
V16_INLINE v16 v16_copysign(v16 mag, v16 sign) {
    const __m256 s = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    return v16_pair(_mm256_or_ps(_mm256_andnot_ps(s, mag.lo), _mm256_and_ps(s, sign.lo)),
                    _mm256_or_ps(_mm256_andnot_ps(s, mag.hi), _mm256_and_ps(s, sign.hi)));
}
V16_INLINE __m256 v16_exp2i_half(__m256 n) {
    const __m256i bits = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127));
    const __m256i byte = _mm256_and_si256(bits, _mm256_set1_epi32(0xFF));
    return _mm256_castsi256_ps(_mm256_slli_epi32(byte, 23));
}
V16_INLINE v16 v16_exp2i(v16 n) { return v16_pair(v16_exp2i_half(n.lo), v16_exp2i_half(n.hi)); }
V16_INLINE m16 v16_lt(v16 a, v16 b) {
    m16 m = {_mm256_cmp_ps(a.lo, b.lo, _CMP_LT_OQ), _mm256_cmp_ps(a.hi, b.hi, _CMP_LT_OQ)};
    return m;
}
V16_INLINE v16 v16_select(m16 m, v16 if_true, v16 if_false) {
    return v16_pair(_mm256_blendv_ps(if_false.lo, if_true.lo, m.lo),
                    _mm256_blendv_ps(if_false.hi, if_true.hi, m.hi));
}
V16_INLINE float v16_tree(v16 a) {
    const __m256 h = _mm256_add_ps(a.lo, a.hi);
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
/* out[r] = v16_tree(x[r]) * scale for eight rows after the tree's first step, h[r] = row r's lo +
   hi, the other additions done on eight lanes at once: the 128-bit halves of row pairs (r, r + 4)
   added, lane i of each half to lane i + 4; then lanes (i, i + 2) and last (0, 1), transposed
   into row order. */
V16_INLINE void v16_tree8_halves(const __m256 *h, float scale, float *out) {
    __m256 s[4];
    for (int r = 0; r < 4; r++) { /* [h_r lanes 0-3 + 4-7 | h_r+4 lanes 0-3 + 4-7] */
        s[r] = _mm256_add_ps(_mm256_permute2f128_ps(h[r], h[r + 4], 0x20),
                             _mm256_permute2f128_ps(h[r], h[r + 4], 0x31));
    }
    /* [t0 of r, t1 of r, t0 of r+1, t1 of r+1 | the same for r+4, r+5], t_i = s_i + s_i+2 */
    const __m256 t01 = _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 t23 = _mm256_add_ps(_mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
}
/* a tree, not the reference's scan: a maximum is exact, so any order gives the same value
   wherever no lane is NaN (as _mm512_reduce_max_ps does) */
V16_INLINE float v16_hmax(v16 a) {
    const __m256 h = _mm256_max_ps(a.lo, a.hi);
    const __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

#elif LLAMAY_VEC == LLAMAY_VEC_AVX512
/* ---- AVX-512F ---- */
#include <immintrin.h>

typedef __m512 v16;
typedef __mmask16 m16;

V16_INLINE v16 v16_set1(float x) { return _mm512_set1_ps(x); }
V16_INLINE v16 v16_zero(void) { return _mm512_setzero_ps(); }
V16_INLINE v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
V16_INLINE void v16_store(float *p, v16 a) { _mm512_storeu_ps(p, a); }
V16_INLINE v16 v16_load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
V16_INLINE v16 v16_load_i8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
V16_INLINE v16 v16_load_partial(const float *p, int n) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}
V16_INLINE void v16_store_partial(float *p, v16 a, int n) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), a);
}
V16_INLINE v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
V16_INLINE v16 v16_sub(v16 a, v16 b) { return _mm512_sub_ps(a, b); }
V16_INLINE v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
V16_INLINE v16 v16_div(v16 a, v16 b) { return _mm512_div_ps(a, b); }
V16_INLINE v16 v16_fma(v16 a, v16 b, v16 c) { return _mm512_fmadd_ps(a, b, c); }
V16_INLINE v16 v16_max(v16 a, v16 b) { return _mm512_max_ps(a, b); }
V16_INLINE v16 v16_min(v16 a, v16 b) { return _mm512_min_ps(a, b); }
V16_INLINE v16 v16_abs(v16 a) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7FFFFFFF)));
}
V16_INLINE v16 v16_copysign(v16 mag, v16 sign) {
    /* ternary logic 0xCA is a ? b : c bitwise: bits of `sign` under the sign mask, of `mag`
       elsewhere */
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_set1_epi32((int)0x80000000u), _mm512_castps_si512(sign),
        _mm512_castps_si512(mag), 0xCA));
}
V16_INLINE v16 v16_exp2i(v16 n) {
    const __m512i bits = _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0xFF)), 23));
}
V16_INLINE m16 v16_lt(v16 a, v16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
V16_INLINE v16 v16_select(m16 m, v16 if_true, v16 if_false) {
    return _mm512_mask_blend_ps(m, if_false, if_true);
}
V16_INLINE float v16_tree(v16 a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
/* out[r] = v16_tree(x[r]) * scale for eight rows, the same additions done side by side (one
   tree a row, by extracts and scalar adds, was 0.4 of attention's time in cache): each step adds
   two shuffles of a pair of vectors, so every add is lane i + lane i + k of one row's partial sums.
   Steps: rows (r, r + 4)'s quarters 0,1 + 2,3 (lane i + i + 8), v16_tree8_first, taken as soon as
   the two rows are summed; then, in v16_tree8_rest once all four pairs (r = 0..3) are, rows
   (r, r + 2)'s eighths of those (i + i + 4), lanes (i, i + 2) and (0, 1) inside each 128-bit
   quarter, and the eight sums gathered into row order. */
typedef __m512 v16_tree_pair; /* [row r, 8 lanes | row r + 4, 8 lanes] */
V16_INLINE v16_tree_pair v16_tree8_first(v16 row, v16 row_4) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(row, row_4, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(row, row_4, _MM_SHUFFLE(3, 2, 3, 2)));
}
V16_INLINE void v16_tree8_rest(const v16_tree_pair *u, float scale, float *out) {
    /* quarters: [row r | row r + 4 | row r + 2 | row r + 6], 4 lanes each, for r = 0, 1 */
    __m512 v[2];
    for (int r = 0; r < 2; r++) {
        v[r] = _mm512_add_ps(_mm512_shuffle_f32x4(u[r], u[r + 2], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[r], u[r + 2], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    /* each quarter [t0 + t2, t1 + t3] of v[0]'s row, then of v[1]'s */
    const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* each quarter [v[0]'s row, v[1]'s row] twice: quarters give rows 0, 1 | 4, 5 | 2, 3 | 6, 7 */
    const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 1, 8, 9, 4, 5, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256 rows = _mm512_castps512_ps256(_mm512_permutexvar_ps(order, sums));
    _mm256_storeu_ps(out, _mm256_mul_ps(rows, _mm256_set1_ps(scale)));
}
V16_INLINE float v16_hmax(v16 a) { return _mm512_reduce_max_ps(a); }

#elif LLAMAY_VEC == LLAMAY_VEC_NEON
/* ---- NEON (aarch64): lanes 4k..4k+3 in v[k] ---- */
#include <arm_neon.h>

typedef struct {
    float32x4_t v[4];
} v16;
typedef struct {
    uint32x4_t v[4];
} m16;

#define V16_MAP(expr)                                                                          \
    v16 r;                                                                                     \
    for (int k = 0; k < 4; k++) r.v[k] = (expr);                                               \
    return r

V16_INLINE v16 v16_set1(float x) { V16_MAP(vdupq_n_f32(x)); }
V16_INLINE v16 v16_zero(void) { return v16_set1(0.0f); }
V16_INLINE v16 v16_load(const float *p) { V16_MAP(vld1q_f32(p + 4 * k)); }
V16_INLINE void v16_store(float *p, v16 a) {
    for (int k = 0; k < 4; k++) vst1q_f32(p + 4 * k, a.v[k]);
}
/* FCVTL quiets a signalling NaN and keeps the top of its payload, as F16C and
   llamay_fp16_to_fp32_scalar do (Linux runs with FPCR.DN clear: NaNs are not replaced by the
   default NaN); every other half converts exactly */
V16_INLINE v16 v16_load_f16(const uint16_t *p) {
    V16_MAP(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4 * k))));
}
V16_INLINE v16 v16_load_i8(const int8_t *p) {
    const int8x16_t b = vld1q_s8(p);
    const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
    v16 r = {{vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_high_s16(lo)),
              vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_high_s16(hi))}};
    return r;
}
V16_INLINE v16 v16_add(v16 a, v16 b) { V16_MAP(vaddq_f32(a.v[k], b.v[k])); }
V16_INLINE v16 v16_sub(v16 a, v16 b) { V16_MAP(vsubq_f32(a.v[k], b.v[k])); }
V16_INLINE v16 v16_mul(v16 a, v16 b) { V16_MAP(vmulq_f32(a.v[k], b.v[k])); }
V16_INLINE v16 v16_div(v16 a, v16 b) { V16_MAP(vdivq_f32(a.v[k], b.v[k])); }
V16_INLINE v16 v16_fma(v16 a, v16 b, v16 c) { V16_MAP(vfmaq_f32(c.v[k], a.v[k], b.v[k])); }
/* a compare and a select, not FMAX/FMIN: those return NaN for a NaN on either side and order
   -0 below +0, where x86's maxps returns b unless a > b */
V16_INLINE v16 v16_max(v16 a, v16 b) {
    V16_MAP(vbslq_f32(vcgtq_f32(a.v[k], b.v[k]), a.v[k], b.v[k]));
}
V16_INLINE v16 v16_min(v16 a, v16 b) {
    V16_MAP(vbslq_f32(vcltq_f32(a.v[k], b.v[k]), a.v[k], b.v[k]));
}
V16_INLINE v16 v16_abs(v16 a) {
    V16_MAP(vreinterpretq_f32_u32(
        vandq_u32(vreinterpretq_u32_f32(a.v[k]), vdupq_n_u32(0x7FFFFFFFu))));
}
V16_INLINE v16 v16_copysign(v16 mag, v16 sign) {
    V16_MAP(vbslq_f32(vdupq_n_u32(0x80000000u), sign.v[k], mag.v[k]));
}
/* FCVTZS truncates as cvttps does; the two differ only out of int32's range, which n is not */
V16_INLINE v16 v16_exp2i(v16 n) {
    V16_MAP(vreinterpretq_f32_s32(vshlq_n_s32(
        vandq_s32(vaddq_s32(vcvtq_s32_f32(n.v[k]), vdupq_n_s32(127)), vdupq_n_s32(0xFF)), 23)));
}
V16_INLINE m16 v16_lt(v16 a, v16 b) {
    m16 m;
    for (int k = 0; k < 4; k++) m.v[k] = vcltq_f32(a.v[k], b.v[k]);
    return m;
}
V16_INLINE v16 v16_select(m16 m, v16 if_true, v16 if_false) {
    V16_MAP(vbslq_f32(m.v[k], if_true.v[k], if_false.v[k]));
}
#undef V16_MAP
/* The tree's first two steps for one row: lanes i + i+8 (v[0] + v[2], v[1] + v[3]), then the
   two halves of those, lane i + i+4: [s0+s4, s1+s5, s2+s6, s3+s7] */
V16_INLINE float32x4_t v16_tree_quarter(v16 a) {
    return vaddq_f32(vaddq_f32(a.v[0], a.v[2]), vaddq_f32(a.v[1], a.v[3]));
}
/* (t0 + t2) + (t1 + t3) of a quarter t */
V16_INLINE float v16_tree_last(float32x4_t t) {
    return vpadds_f32(vadd_f32(vget_low_f32(t), vget_high_f32(t)));
}
V16_INLINE float v16_tree(v16 a) { return v16_tree_last(v16_tree_quarter(a)); }
/* out[r] = v16_tree(x[r]) * scale for eight rows: each row's quarter as soon as it is summed,
   then the last two steps of all eight side by side: (t0 + t2, t1 + t3) of rows r and r + 1
   by 64-bit zips, and their pairwise sums, four rows a register. */
typedef struct {
    float32x4_t row, row_4;
} v16_tree_pair;
V16_INLINE v16_tree_pair v16_tree8_first(v16 row, v16 row_4) {
    return (v16_tree_pair){v16_tree_quarter(row), v16_tree_quarter(row_4)};
}
/* [a0 + a2, a1 + a3, b0 + b2, b1 + b3] */
V16_INLINE float32x4_t v16_halves_of_two(float32x4_t a, float32x4_t b) {
    const float64x2_t a64 = vreinterpretq_f64_f32(a), b64 = vreinterpretq_f64_f32(b);
    return vaddq_f32(vreinterpretq_f32_f64(vzip1q_f64(a64, b64)),
                     vreinterpretq_f32_f64(vzip2q_f64(a64, b64)));
}
V16_INLINE void v16_tree8_rest(const v16_tree_pair *u, float scale, float *out) {
    const float32x4_t low = vpaddq_f32(v16_halves_of_two(u[0].row, u[1].row),
                                       v16_halves_of_two(u[2].row, u[3].row));
    const float32x4_t high = vpaddq_f32(v16_halves_of_two(u[0].row_4, u[1].row_4),
                                        v16_halves_of_two(u[2].row_4, u[3].row_4));
    vst1q_f32(out, vmulq_n_f32(low, scale));
    vst1q_f32(out + 4, vmulq_n_f32(high, scale));
}
/* AVX2's tree of maxima, step for step (lanes i, i + 8; i, i + 4; i, i + 2; 0, 1), so that the
   two agree even where lanes tie at +0 and -0; any order gives the reference's scan's value
   wherever no lane is NaN and no zeros of both signs tie for the maximum */
V16_INLINE float32x4_t v16_max4(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}
V16_INLINE float v16_hmax(v16 a) {
    const float32x4_t s = v16_max4(v16_max4(a.v[0], a.v[2]), v16_max4(a.v[1], a.v[3]));
    const float32x4_t t = v16_max4(s, vcombine_f32(vget_high_f32(s), vget_high_f32(s)));
    const float t0 = vgetq_lane_f32(t, 0), t1 = vgetq_lane_f32(t, 1);
    return t0 > t1 ? t0 : t1;
}

#else
#error "set LLAMAY_VEC to LLAMAY_VEC_REF, LLAMAY_VEC_AVX2, LLAMAY_VEC_AVX512 or LLAMAY_VEC_NEON"
#endif

/* lanes [0, n) through a buffer of sixteen, where no masked load or store does it */
#if LLAMAY_VEC == LLAMAY_VEC_AVX2 || LLAMAY_VEC == LLAMAY_VEC_NEON
V16_INLINE v16 v16_load_partial(const float *p, int n) {
    float tmp[16] = {0};
    memcpy(tmp, p, (size_t)n * 4);
    return v16_load(tmp);
}
V16_INLINE void v16_store_partial(float *p, v16 a, int n) {
    float tmp[16];
    v16_store(tmp, a);
    memcpy(p, tmp, (size_t)n * 4);
}
#endif

/* ---- functions built from the operations above: the same steps in every implementation ---- */

/* e^x, within 2 ulp on [-87.3, 88]: x = n ln2 + r, a degree-6 polynomial in r (Cephes expf's
   coefficients), times 2^n. Inputs are clamped to [-88, 88]; below -87.3 the result is 0. */
V16_INLINE v16 v16_exp(v16 x) {
    const v16 xc = v16_min(v16_max(x, v16_set1(-88.0f)), v16_set1(88.0f));
    const v16 magic = v16_set1(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    const v16 n = v16_sub(v16_add(v16_mul(xc, v16_set1(1.44269504088896341f)), magic), magic);
    v16 r = v16_fma(n, v16_set1(-0.693359375f), xc);
    r = v16_fma(n, v16_set1(2.12194440e-4f), r);
    v16 p = v16_set1(1.9875691500e-4f);
    p = v16_fma(p, r, v16_set1(1.3981999507e-3f));
    p = v16_fma(p, r, v16_set1(8.3334519073e-3f));
    p = v16_fma(p, r, v16_set1(4.1665795894e-2f));
    p = v16_fma(p, r, v16_set1(1.6666665459e-1f));
    p = v16_fma(p, r, v16_set1(5.0000001201e-1f));
    const v16 y = v16_add(v16_fma(p, v16_mul(r, r), r), v16_set1(1.0f));
    return v16_select(v16_lt(x, v16_set1(-87.3f)), v16_zero(), v16_mul(y, v16_exp2i(n)));
}

/* tanh x (Cephes tanhf): an odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1) above. */
V16_INLINE v16 v16_tanh(v16 x) {
    const v16 a = v16_abs(x);
    const v16 z = v16_mul(x, x);
    v16 p = v16_set1(-5.70498872745e-3f);
    p = v16_fma(p, z, v16_set1(2.06390887954e-2f));
    p = v16_fma(p, z, v16_set1(-5.37397155531e-2f));
    p = v16_fma(p, z, v16_set1(1.33314422036e-1f));
    p = v16_fma(p, z, v16_set1(-3.33332819422e-1f));
    const v16 small = v16_fma(v16_mul(p, z), x, x);
    const v16 e = v16_exp(v16_add(a, a));
    const v16 large = v16_sub(v16_set1(1.0f), v16_div(v16_set1(2.0f), v16_add(e, v16_set1(1.0f))));
    return v16_select(v16_lt(a, v16_set1(0.625f)), small, v16_copysign(large, x));
}

#endif
