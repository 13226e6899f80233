/* Q2_K..Q6_K and IQ4_XS x Q8_K over the eight-row interleaved copy (KX8, matmul_kernels.h),
   written once for three vector layers: AVX2 (one group of eight rows per ymm), AVX-512 VNNI
   (two groups side by side in a zmm, sixteen rows) and NEON (one group in a pair of 128-bit
   registers), chosen by KX8_AVX512 or KX8_NEON in the including file.

   A 32-bit lane is one row: a chunk of 32 weight bytes holds four elements of each row per
   nibble half, the activations' four bytes are broadcast, and each row's products are added
   into its own lane, then multiplied by the row's sub-block scale. So a super-block's exact
   integer dot products come out as one vector of rows, never reduced horizontally, and the
   reference's fp32 steps (matmul.h: per super-block b, fmaf(d_w * d_a, i1, lane b % 8), then
   the min term, then the tree) run with the rows as SIMD lanes. Integer sums are exact in any
   order: every layer gives the reference's integers, so the same bits.

   AVX2: vpmaddubsw (unsigned weights x signed activations into int16 pairs) then vpmaddwd by
   the scale. The int16 sums never saturate: a Q4_K pair is at most 2 x 15 x 128 in magnitude,
   and one sub-block's eight of them per lane (four chunks) sum to at most 30720; a Q5_K pair
   at most 2 x 31 x 128, so its int16 sums are taken to int32 two chunks at a time, at most
   31744; a Q6_K pair at most 2 x 63 x 128, taken to int32 one chunk at a time, at most 32256;
   Q3_K's and Q2_K's (codes below 8) a 16-element sub-block (two chunks) at a time, at most
   7168. IQ4_XS's weights are signed there (vpmaddubsw of |w| with x signed as w: at most
   2 x 127 x 127 a pair, activations stopping at -127), each half of a chunk widened by the
   scale at once. AVX-512 makes them unsigned (+128) and takes 128 times each sub-block's
   scaled activation sum back, as for Q6_K's offset.
   AVX-512: vpdpbusd adds each row's four products straight into int32 (a sub-block's sum is
   at most 32 x 31 x 128), then one vpmulld by the scale per sub-block.
   NEON: each row's four products into int32 as well (matmul_neon_body.h's dot4x2: SDOT, or
   int16 products widened in pairs where the CPU lacks it), signed bytes by signed bytes, so
   that no type needs an offset: IQ4_XS's values are used as they are.

   Many tokens (prefill, or a decode step of several sequences) share each chunk as it is
   decoded, KX_TOKENS at a time; every token's arithmetic is the same as alone. */

/* ---- the vector layer: KX_ROWS int32 / fp32 lanes, one per row ---- */

#ifdef KX8_AVX512

#define KX_ROWS 16
/* enough independent vpdpbusd chains to cover its latency, within 32 registers */
#define KX_TOKENS 8
/* tokens a pass over expanded super-blocks takes (kx8_kernel: steps of more than
   KX8_DIRECT_TOKENS) */
#define KX8_EXPANDED_TOKENS KX_TOKENS
#define KX_Q5_K_CHUNKS_PER_SUM 4
#define KX_Q6_K_CHUNKS_PER_SUM 2
typedef __m512i kx_i;
typedef __m512 kx_f;

/* the 32 bytes at `off` of a group's super-block (lanes 0-7) and of the next group's (8-15) */
INLINE kx_i kx_load(const uint8_t *g, const uint8_t *next, int off) {
    const __m256i low = _mm256_loadu_si256((const __m256i *)(g + off));
    return _mm512_inserti64x4(_mm512_castsi256_si512(low),
                              _mm256_loadu_si256((const __m256i *)(next + off)), 1);
}

INLINE __m256i kx_load16x2(const uint8_t *g, const uint8_t *next, int off) {
    const __m128i low = _mm_loadu_si128((const __m128i *)(g + off));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(low),
                                   _mm_loadu_si128((const __m128i *)(next + off)), 1);
}

/* 16 bytes of each: every row's two scale bytes, as an int16 pair */
INLINE kx_i kx_load_pairs_u8(const uint8_t *g, const uint8_t *next, int off) {
    return _mm512_cvtepu8_epi16(kx_load16x2(g, next, off));
}

INLINE kx_i kx_load_pairs_i8(const uint8_t *g, const uint8_t *next, int off) {
    return _mm512_cvtepi8_epi16(kx_load16x2(g, next, off));
}

/* eight fp16 of each */
INLINE kx_f kx_load_f16(const uint8_t *g, const uint8_t *next, int off) {
    return _mm512_cvtph_ps(kx_load16x2(g, next, off));
}

#define kx_zero _mm512_setzero_si512
#define kx_set1 _mm512_set1_epi32
#define kx_set1_8 _mm512_set1_epi8
#define kx_and _mm512_and_si512
#define kx_srli16 _mm512_srli_epi16
#define kx_slli16 _mm512_slli_epi16
#define kx_slli32 _mm512_slli_epi32
#define kx_add32 _mm512_add_epi32
#define kx_sub8 _mm512_sub_epi8
#define kx_sub32 _mm512_sub_epi32
/* acc + the int16 pairs' products, summed by pair (vpdpwssd) */
#define kx_dot16 _mm512_dpwssd_epi32
#define kx_fzero _mm512_setzero_ps
#define kx_fadd _mm512_add_ps
/* acc + (d x da) x i, fused (kx8_group) */
INLINE kx_f kx_fstep(kx_f acc, kx_f d, float da, kx_i i) {
    return _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(da)), _mm512_cvtepi32_ps(i), acc);
}
/* the rows of one group (lanes 0-7), or of both */
INLINE void kx_store_rows(float *p, kx_f v, int two) {
    _mm512_mask_storeu_ps(p, two ? 0xFFFF : 0x00FF, v);
}

/* (a & mask) | b: one vpternlogd */
INLINE kx_i kx_and_or(kx_i a, kx_i mask, kx_i b) {
    return _mm512_ternarylogic_epi32(a, mask, b, 0xEA);
}

/* a chunk's products of lo and hi with the activations' four bytes xl and xh, added into the
   partial sums (int32) */
INLINE kx_i kx_chunk(kx_i partial, kx_i lo, kx_i hi, kx_i xl, kx_i xh) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(partial, lo, xl), hi, xh);
}

/* the scale of sub-block 2p + s of each row, from its int16 pair of sub-blocks 2p, 2p + 1 */
INLINE kx_i kx_scale(kx_i pair, int s) {
    return s ? _mm512_srai_epi32(pair, 16) : _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
}

INLINE kx_i kx_scaled(kx_i partial, kx_i scale) { return _mm512_mullo_epi32(partial, scale); }

/* 32 registers: nothing spills */
INLINE kx_i kx_settle(kx_i v) { return v; }

/* IQ4_XS's values, made unsigned (+128: matmul_avx512.c's table) */
INLINE kx_i kx_iq4_xs_table(void) { return lookup_table(kvalues_iq4nl); }
#define kx_lookup _mm512_shuffle_epi8

#elif defined(KX8_NEON)

#define KX_ROWS 8
/* 32 registers of 128 bits: AVX2's sixteen of 256, and its token counts */
#define KX_TOKENS 8
#define KX8_EXPANDED_TOKENS 4
/* the partial sums are int32 (dot4x2): a whole sub-block at a time */
#define KX_Q5_K_CHUNKS_PER_SUM 4
#define KX_Q6_K_CHUNKS_PER_SUM 2
/* kx_chunk multiplies signed bytes by signed bytes (kx8_biased, kx8_ints) */
#define KX_SIGNED_DOT 1

/* rows 0-3 in v[0], 4-7 in v[1]: bytes, int16 pairs or int32, as each operation reads them */
typedef struct {
    int32x4_t v[2];
} kx_i;
typedef struct {
    float32x4_t v[2];
} kx_f;

INLINE kx_i kx_pair(int32x4_t rows0, int32x4_t rows4) {
    kx_i r = {{rows0, rows4}};
    return r;
}

INLINE kx_f kx_fpair(float32x4_t rows0, float32x4_t rows4) {
    kx_f r = {{rows0, rows4}};
    return r;
}

INLINE kx_i kx_load(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    return kx_pair(vld1q_s32((const int32_t *)(g + off)),
                   vld1q_s32((const int32_t *)(g + off + 16)));
}

/* 16 bytes: every row's two scale bytes, as an int16 pair */
INLINE kx_i kx_load_pairs_u8(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    const uint8x16_t b = vld1q_u8(g + off);
    return kx_pair(vreinterpretq_s32_u16(vmovl_u8(vget_low_u8(b))),
                   vreinterpretq_s32_u16(vmovl_high_u8(b)));
}

INLINE kx_i kx_load_pairs_i8(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    const int8x16_t b = vld1q_s8((const int8_t *)(g + off));
    return kx_pair(vreinterpretq_s32_s16(vmovl_s8(vget_low_s8(b))),
                   vreinterpretq_s32_s16(vmovl_high_s8(b)));
}

INLINE kx_f kx_load_f16(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    const uint16x8_t h = vld1q_u16((const uint16_t *)(g + off));
    return kx_fpair(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))),
                    vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h))));
}

INLINE kx_i kx_zero(void) { return kx_pair(vdupq_n_s32(0), vdupq_n_s32(0)); }
INLINE kx_i kx_set1(int32_t x) { return kx_pair(vdupq_n_s32(x), vdupq_n_s32(x)); }
INLINE kx_i kx_set1_8(char x) {
    const int32x4_t b = vreinterpretq_s32_s8(vdupq_n_s8((int8_t)x));
    return kx_pair(b, b);
}
INLINE kx_i kx_and(kx_i a, kx_i b) {
    return kx_pair(vandq_s32(a.v[0], b.v[0]), vandq_s32(a.v[1], b.v[1]));
}
INLINE kx_i kx_and_or(kx_i a, kx_i mask, kx_i b) {
    return kx_pair(vorrq_s32(vandq_s32(a.v[0], mask.v[0]), b.v[0]),
                   vorrq_s32(vandq_s32(a.v[1], mask.v[1]), b.v[1]));
}
/* shifts of the 16-bit lanes by a register (USHL: right where negative), so that the count
   need not be a literal where the compiler meets the call */
INLINE int32x4_t kx_shift16(int32x4_t v, int by) {
    return vreinterpretq_s32_u16(vshlq_u16(vreinterpretq_u16_s32(v), vdupq_n_s16((int16_t)by)));
}
INLINE kx_i kx_srli16(kx_i a, int n) {
    return kx_pair(kx_shift16(a.v[0], -n), kx_shift16(a.v[1], -n));
}
INLINE kx_i kx_slli16(kx_i a, int n) {
    return kx_pair(kx_shift16(a.v[0], n), kx_shift16(a.v[1], n));
}
INLINE kx_i kx_slli32(kx_i a, int n) {
    const int32x4_t by = vdupq_n_s32(n);
    return kx_pair(vshlq_s32(a.v[0], by), vshlq_s32(a.v[1], by));
}
INLINE kx_i kx_add32(kx_i a, kx_i b) {
    return kx_pair(vaddq_s32(a.v[0], b.v[0]), vaddq_s32(a.v[1], b.v[1]));
}
INLINE kx_i kx_sub32(kx_i a, kx_i b) {
    return kx_pair(vsubq_s32(a.v[0], b.v[0]), vsubq_s32(a.v[1], b.v[1]));
}
INLINE kx_i kx_sub8(kx_i a, kx_i b) {
    return kx_pair(
        vreinterpretq_s32_s8(vsubq_s8(vreinterpretq_s8_s32(a.v[0]), vreinterpretq_s8_s32(b.v[0]))),
        vreinterpretq_s32_s8(vsubq_s8(vreinterpretq_s8_s32(a.v[1]), vreinterpretq_s8_s32(b.v[1]))));
}
/* each row's int16 pair (a_0, a_1) times (b_0, b_1), summed: a_0 b_0 + a_1 b_1 (int32) */
INLINE int32x4_t kx_dot16_rows(int32x4_t a, int32x4_t b) {
    const int16x8_t x = vreinterpretq_s16_s32(a), y = vreinterpretq_s16_s32(b);
    return vpaddq_s32(vmull_s16(vget_low_s16(x), vget_low_s16(y)), vmull_high_s16(x, y));
}
INLINE kx_i kx_dot16(kx_i acc, kx_i a, kx_i b) {
    return kx_pair(vaddq_s32(acc.v[0], kx_dot16_rows(a.v[0], b.v[0])),
                   vaddq_s32(acc.v[1], kx_dot16_rows(a.v[1], b.v[1])));
}
INLINE kx_f kx_fzero(void) { return kx_fpair(vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)); }
INLINE kx_f kx_fadd(kx_f a, kx_f b) {
    return kx_fpair(vaddq_f32(a.v[0], b.v[0]), vaddq_f32(a.v[1], b.v[1]));
}
INLINE kx_f kx_fstep(kx_f acc, kx_f d, float da, kx_i i) {
    kx_f r;
    for (int k = 0; k < 2; k++) {
        r.v[k] = vfmaq_f32(acc.v[k], vmulq_n_f32(d.v[k], da), vcvtq_f32_s32(i.v[k]));
    }
    return r;
}
INLINE void kx_store_rows(float *p, kx_f v, int two) {
    (void)two;
    vst1q_f32(p, v.v[0]);
    vst1q_f32(p + 4, v.v[1]);
}

/* a chunk's products of lo and hi with the activations' four bytes xl and xh, added into the
   partial sums (int32) */
INLINE kx_i kx_chunk(kx_i partial, kx_i lo, kx_i hi, kx_i xl, kx_i xh) {
    kx_i r;
    for (int k = 0; k < 2; k++) {
        r.v[k] = dot4x2(partial.v[k], vreinterpretq_s8_s32(lo.v[k]), vreinterpretq_s8_s32(xl.v[k]),
                        vreinterpretq_s8_s32(hi.v[k]), vreinterpretq_s8_s32(xh.v[k]));
    }
    return r;
}

/* the scale of sub-block 2p + s of each row, from its int16 pair of sub-blocks 2p, 2p + 1 */
INLINE kx_i kx_scale(kx_i pair, int s) {
    kx_i r;
    for (int k = 0; k < 2; k++) {
        r.v[k] = s ? vshrq_n_s32(pair.v[k], 16) : vshrq_n_s32(vshlq_n_s32(pair.v[k], 16), 16);
    }
    return r;
}

INLINE kx_i kx_scaled(kx_i partial, kx_i scale) {
    return kx_pair(vmulq_s32(partial.v[0], scale.v[0]), vmulq_s32(partial.v[1], scale.v[1]));
}

INLINE kx_i kx_settle(kx_i v) { return v; }

/* IQ4_XS's values as they are (signed) */
INLINE kx_i kx_iq4_xs_table(void) {
    const int32x4_t t = vreinterpretq_s32_s8(vld1q_s8(kvalues_iq4nl));
    return kx_pair(t, t);
}
INLINE kx_i kx_lookup(kx_i table, kx_i index) {
    kx_i r;
    for (int k = 0; k < 2; k++) {
        r.v[k] = vreinterpretq_s32_s8(
            vqtbl1q_s8(vreinterpretq_s8_s32(table.v[k]), vreinterpretq_u8_s32(index.v[k])));
    }
    return r;
}

#else /* AVX2 */

#define KX_ROWS 8
/* A step of up to eight tokens takes one pass, assembling each chunk's bits once for all of
   them: with sixteen registers some sums live in L1, which costs less than assembling the bits
   twice, or expanding them first (twice the bytes to read back). Over expanded super-blocks
   (prefill) there are no bits to share, and passes of eight spill more than they save. */
#define KX_TOKENS 8
#define KX8_EXPANDED_TOKENS 4
#define KX_Q5_K_CHUNKS_PER_SUM 2
#define KX_Q6_K_CHUNKS_PER_SUM 1
typedef __m256i kx_i;
typedef __m256 kx_f;

INLINE kx_i kx_load(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    return _mm256_loadu_si256((const __m256i *)(g + off));
}

INLINE kx_i kx_load_pairs_u8(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g + off)));
}

INLINE kx_i kx_load_pairs_i8(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g + off)));
}

INLINE kx_f kx_load_f16(const uint8_t *g, const uint8_t *next, int off) {
    (void)next;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + off)));
}

#define kx_zero _mm256_setzero_si256
#define kx_set1 _mm256_set1_epi32
#define kx_set1_8 _mm256_set1_epi8
#define kx_and _mm256_and_si256
#define kx_srli16 _mm256_srli_epi16
#define kx_slli16 _mm256_slli_epi16
#define kx_slli32 _mm256_slli_epi32
#define kx_add32 _mm256_add_epi32
#define kx_sub8 _mm256_sub_epi8
#define kx_sub32 _mm256_sub_epi32
INLINE kx_i kx_dot16(kx_i acc, kx_i a, kx_i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#define kx_fzero _mm256_setzero_ps
#define kx_fadd _mm256_add_ps
INLINE kx_f kx_fstep(kx_f acc, kx_f d, float da, kx_i i) {
    return _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(da)), _mm256_cvtepi32_ps(i), acc);
}
INLINE void kx_store_rows(float *p, kx_f v, int two) {
    (void)two;
    _mm256_storeu_ps(p, v);
}

INLINE kx_i kx_and_or(kx_i a, kx_i mask, kx_i b) {
    return _mm256_or_si256(_mm256_and_si256(a, mask), b);
}

/* A sum, complete where it stands. Integer adds reassociate freely, and GCC computed a
   sub-block's products for every token (32 registers' worth) before adding any, spilling most
   of them to the stack; an empty asm on each sum keeps the order as written. */
INLINE kx_i kx_settle(kx_i v) {
    __asm__("" : "+x"(v));
    return v;
}

/* the partial sums are int16 pairs */
INLINE kx_i kx_chunk(kx_i partial, kx_i lo, kx_i hi, kx_i xl, kx_i xh) {
    const __m256i dl = _mm256_maddubs_epi16(lo, xl), dh = _mm256_maddubs_epi16(hi, xh);
    return kx_settle(_mm256_add_epi16(partial, _mm256_add_epi16(dl, dh)));
}

/* int16 pair lanes [a, b] of each row -> [a, a] (s = 0) or [b, b] (s = 1) */
INLINE kx_i kx_scale(kx_i pair, int s) {
    const __m256i first = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0,
                                           1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i second = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14,
                                            15, 2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15,
                                            14, 15);
    return _mm256_shuffle_epi8(pair, s ? second : first);
}

INLINE kx_i kx_scaled(kx_i partial, kx_i scale) { return _mm256_madd_epi16(partial, scale); }

/* IQ4_XS's values as they are (signed) */
INLINE kx_i kx_iq4_xs_table(void) { return lookup_table(kvalues_iq4nl); }
#define kx_lookup _mm256_shuffle_epi8
#define KX_SIGNED_IQ4_XS 1

/* a chunk of signed weights lo, hi with the activations' four bytes xl, xh: each half's int16
   pairs (signed_pairs: no saturation) widened by the scale pair, into acc (int32) */
INLINE kx_i kx_chunk_signed(kx_i acc, kx_i lo, kx_i hi, kx_i xl, kx_i xh, kx_i scale) {
    return kx_settle(
        _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(signed_pairs(lo, xl), scale),
                                               _mm256_madd_epi16(signed_pairs(hi, xh), scale))));
}

#endif

/* ---- the kernel, written once ---- */

/* llamay_tree8 of eight accumulators held lane by lane */
INLINE kx_f kx8_tree8(const kx_f a[8]) {
    const kx_f s0 = kx_fadd(a[0], a[4]), s1 = kx_fadd(a[1], a[5]);
    const kx_f s2 = kx_fadd(a[2], a[6]), s3 = kx_fadd(a[3], a[7]);
    return kx_fadd(kx_fadd(s0, s2), kx_fadd(s1, s3));
}

INLINE kx_i kx8_broadcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return kx_set1(v);
}

/* Q4_K/Q5_K: the int16 pairs (B_2p, B_2p+1), p = 0..3, of a super-block's activation sums
   (B_j: the sum of sub-block j's 32 quants, two sums of 16; at most 32 x 128, no saturation) */
INLINE void kx8_sum_pairs(const int16_t *sums, int32_t pairs[4]) {
#ifdef KX8_NEON
    const int16x8_t b = vpaddq_s16(vld1q_s16(sums), vld1q_s16(sums + 8)); /* B_0 .. B_7 */
    vst1q_s32(pairs, vreinterpretq_s32_s16(b));
#else
    const __m256i s = _mm256_loadu_si256((const __m256i *)sums);
    const __m256i b = _mm256_madd_epi16(s, _mm256_set1_epi16(1)); /* B_0 .. B_7 */
    int32_t packed[8]; /* per 128-bit lane: B_0..B_3 twice, then B_4..B_7 twice, as int16 */
    _mm256_storeu_si256((__m256i *)packed, _mm256_packs_epi32(b, b));
    pairs[0] = packed[0];
    pairs[1] = packed[1];
    pairs[2] = packed[4];
    pairs[3] = packed[5];
#endif
}

/* v's bits moved by `by` places (left where positive) within 16-bit lanes: an immediate
   shift for each constant count (the callers' counts, 4 down to -6) */
INLINE kx_i kx8_move_bits(kx_i v, int by) {
    switch (by) {
    case 4: return kx_slli16(v, 4);
    case 3: return kx_slli16(v, 3);
    case 2: return kx_slli16(v, 2);
    case 1: return kx_slli16(v, 1);
    case 0: return v;
    case -1: return kx_srli16(v, 1);
    case -2: return kx_srli16(v, 2);
    case -3: return kx_srli16(v, 3);
    case -4: return kx_srli16(v, 4);
    case -5: return kx_srli16(v, 5);
    default: return kx_srli16(v, 6);
    }
}

/* Chunk c's products for each token, added into its partial sums: lo and hi are the chunk's
   weights of elements 8c + i and 8c + 4 + i (i = 0..3) in each row's four bytes */
INLINE void kx8_chunk_tokens(kx_i lo, kx_i hi, const int8_t *const *x, const int nt, int c,
                             kx_i *partial) {
    for (int t = 0; t < nt; t++) {
        partial[t] = kx_chunk(partial[t], lo, hi, kx8_broadcast4(x[t] + 8 * c),
                              kx8_broadcast4(x[t] + 8 * c + 4));
    }
}

/* kx8_chunk_tokens with the roles swapped: x holds the activations plus 128 (unsigned), lo and
   hi the codes less their offset (signed) */
INLINE void kx8_chunk_tokens_biased(kx_i lo, kx_i hi, const int8_t *const *x, const int nt,
                                    int c, kx_i *partial) {
    for (int t = 0; t < nt; t++) {
        partial[t] = kx_chunk(partial[t], kx8_broadcast4(x[t] + 8 * c),
                              kx8_broadcast4(x[t] + 8 * c + 4), lo, hi);
    }
}

#ifdef KX_SIGNED_IQ4_XS
INLINE void kx8_chunk_tokens_signed(kx_i lo, kx_i hi, const int8_t *const *x, const int nt,
                                    int c, kx_i scale, kx_i *i1) {
    for (int t = 0; t < nt; t++) {
        i1[t] = kx_chunk_signed(i1[t], lo, hi, kx8_broadcast4(x[t] + 8 * c),
                                kx8_broadcast4(x[t] + 8 * c + 4), scale);
    }
}
#endif

INLINE void kx8_take_partials(kx_i *partial, kx_i scale, const int nt, kx_i *i1) {
    for (int t = 0; t < nt; t++) {
        i1[t] = kx_settle(kx_add32(i1[t], kx_scaled(partial[t], scale)));
        partial[t] = kx_zero();
    }
}

/* A super-block of KX_ROWS rows, expanded for the dots: its quants as whole bytes (chunk c's
   low-half elements at [2c], its high-half ones at [2c + 1], each row's four bytes in its
   lane), then each sub-block's scales at [KX8_SCALES + j]. Prefill expands a group's
   super-blocks once for every token of its chunk: the bit assembly then costs nothing per
   token. */
#define KX8_SCALES 64
#define KX8_OFFSET 80   /* kx8_biased types: each row's offset term, as int32 */
#define KX8_EXPANDED 81 /* vectors per super-block */

/* Q6_K's and Q3_K's codes q stand for q - 32 and q - 4 (AVX-512's IQ4_XS values for q - 128):
   i1 = sum_j sc_j sum_k (q_k - o) x_k.
   Read as they are, each token pays for the offset's term o sum_j sc_j B_j (eight vpdpwssd, or
   vpmaddwd and add, a super-block). Prefill expands the codes with the offset taken off
   (signed bytes) and reads the activations with 128 added (unsigned: vpdpbusd and vpmaddubsw
   multiply unsigned bytes by signed ones), so that with P_j = sum_k (x_k + 128)(q_k - o) and
   Q_j = sum_k (q_k - o), a row's own: i1 = sum_j sc_j P_j - 128 sum_j sc_j Q_j, the second
   term worked out once, as the super-block is expanded. The integers are the reference's:
   a Q6_K or Q3_K product is at most 255 x 32 in magnitude, so AVX2's int16 pair at most 16320
   and a chunk's two pairs at most 32640 (no saturation), a sub-block's sum at most 130560; an
   IQ4_XS one (AVX-512 only: vpdpbusd sums in int32) at most 255 x 127. */
INLINE int kx8_biased(int type) {
#if defined(KX_SIGNED_DOT) /* no unsigned operand to move the activations into */
    (void)type;
    return 0;
#elif defined(KX_SIGNED_IQ4_XS)
    return type == LLAMAY_TYPE_Q6_K || type == LLAMAY_TYPE_Q3_K;
#else
    return type == LLAMAY_TYPE_Q6_K || type == LLAMAY_TYPE_Q3_K || type == LLAMAY_TYPE_IQ4_XS;
#endif
}

/* o: what a kx8_biased type's assembled codes stand for less (IQ4_XS's AVX-512 values are
   the table's plus 128) */
INLINE int kx8_code_offset(int type) {
    return type == LLAMAY_TYPE_Q6_K ? 32 : type == LLAMAY_TYPE_Q3_K ? 4 : 128;
}

/* Q2_K's scale (low nibble) or min (high nibble) pairs p: the bytes as int16 pairs */
INLINE kx_i kx8_q2_K_nibbles(const uint8_t *g, const uint8_t *next, int p, int high) {
    const kx_i pair = kx_load_pairs_u8(g, next, LLAMAY_KX8_Q2_K_SCALES + 16 * p);
    return high ? kx_srli16(pair, 4) : kx_and(pair, kx_set1(0x000F000F));
}

/* Sub-block j's scales (j < 8 for Q4_K, Q5_K and IQ4_XS, < 16 for Q2_K, Q3_K and Q6_K) */
INLINE kx_i kx8_scale_of(int type, const uint8_t *g, const uint8_t *next, int j) {
    switch (type) {
    case LLAMAY_TYPE_Q6_K:
    case LLAMAY_TYPE_Q3_K:
    case LLAMAY_TYPE_IQ4_XS: /* the same place */
        return kx_scale(kx_load_pairs_i8(g, next, LLAMAY_KX8_Q6_K_SCALES + 16 * (j / 2)), j % 2);
    case LLAMAY_TYPE_Q2_K: return kx_scale(kx8_q2_K_nibbles(g, next, j / 2, 0), j % 2);
    default:
        return kx_scale(kx_load_pairs_u8(g, next, LLAMAY_KX8_Q4_K_SCALES + 16 * (j / 2)), j % 2);
    }
}

/* Chunk c's quants as whole bytes: its low-half elements into lo, its high-half ones into hi */
INLINE void kx8_assemble(int type, const uint8_t *g, const uint8_t *next, int c, kx_i *lo,
                         kx_i *hi) {
    if (type == LLAMAY_TYPE_Q3_K || type == LLAMAY_TYPE_Q2_K) {
        /* a code's two bits are at 2s of its byte, s = 2 (c % 2) + half; Q3_K's third bit
           (k = 2 (c % 4) + half) is moved to bit 2: no bit crosses into a kept place */
        const kx_i two = kx_set1_8(0x03), bit2 = kx_set1_8(0x04);
        const int q3 = type == LLAMAY_TYPE_Q3_K, s = 2 * (c % 2), k = 2 * (c % 4);
        const kx_i v = kx_load(g, next, (q3 ? LLAMAY_KX8_Q3_K_LOW : LLAMAY_KX8_Q2_K_CODES) +
                                            32 * (c / 2));
        if (!q3) {
            *lo = kx_and(kx8_move_bits(v, -2 * s), two);
            *hi = kx_and(kx8_move_bits(v, -2 * s - 2), two);
            return;
        }
        const kx_i h = kx_load(g, next, LLAMAY_KX8_Q3_K_HIGH + 32 * (c / 4));
        *lo = kx_and_or(kx8_move_bits(v, -2 * s), two, kx_and(kx8_move_bits(h, 2 - k), bit2));
        *hi = kx_and_or(kx8_move_bits(v, -2 * s - 2), two,
                        kx_and(kx8_move_bits(h, 1 - k), bit2));
        return;
    }
    const kx_i low4 = kx_set1_8(0x0F);
    if (type == LLAMAY_TYPE_IQ4_XS) {
        const kx_i q = kx_load(g, next, LLAMAY_KX8_IQ4_XS_QUANTS + 32 * c);
        *lo = kx_lookup(kx_iq4_xs_table(), kx_and(q, low4));
        *hi = kx_lookup(kx_iq4_xs_table(), kx_and(kx_srli16(q, 4), low4));
        return;
    }
    if (type == LLAMAY_TYPE_Q6_K) {
        /* q = low | high << 4 in [0, 64); chunk c's high bits are in pair c / 2 */
        const kx_i bits45 = kx_set1_8(0x30);
        const kx_i q = kx_load(g, next, LLAMAY_KX8_Q6_K_LOW + 32 * c);
        const kx_i h = kx_load(g, next, LLAMAY_KX8_Q6_K_HIGH + 32 * (c / 2));
        /* the high bits, moved to bits 4-5 (no bit crosses into a kept position) */
        const kx_i hl = c % 2 ? kx_slli16(h, 4) : h;
        const kx_i hh = c % 2 ? kx_slli16(h, 2) : kx_srli16(h, 2);
        *lo = kx_and_or(q, low4, kx_and(hl, bits45));
        *hi = kx_and_or(kx_srli16(q, 4), low4, kx_and(hh, bits45));
        return;
    }
    const kx_i q = kx_load(g, next, LLAMAY_KX8_Q4_K_QUANTS + 32 * c);
    if (type == LLAMAY_TYPE_Q5_K) {
        /* the fifth bits of sub-block c / 4: chunk c % 4's at bits c % 4 (low half) and
           4 + c % 4 (high half), moved to bit 4; no bit crosses into bit 4 of another byte */
        const kx_i bit4 = kx_set1_8(0x10);
        const kx_i fifth = kx_load(g, next, LLAMAY_KX8_Q5_K_FIFTH + 32 * (c / 4));
        *lo = kx_and_or(q, low4, kx_and(kx8_move_bits(fifth, 4 - c % 4), bit4));
        *hi = kx_and_or(kx_srli16(q, 4), low4, kx_and(kx8_move_bits(fifth, -(c % 4)), bit4));
        return;
    }
    *lo = kx_and(q, low4);
    *hi = kx_and(kx_srli16(q, 4), low4);
}

/* Q4_K's, Q5_K's and IQ4_XS's sub-blocks are 32 elements (four chunks), the others' 16 */
INLINE int kx8_chunks_per_scale(int type) {
    return type == LLAMAY_TYPE_Q4_K || type == LLAMAY_TYPE_Q5_K || type == LLAMAY_TYPE_IQ4_XS
               ? 4
               : 2;
}

/* out[t]: each row's int16 pairs w[p] (of 32-element sub-blocks 2p, 2p + 1) dotted with token
   t's activation sums of those sub-blocks */
INLINE void kx8_sums32(const kx_i w[4], const llamay_act_q *const *a, int b, const int nt,
                       kx_i *out) {
    for (int t = 0; t < nt; t++) {
        int32_t pairs[4];
        kx8_sum_pairs(a[t]->sum + 16 * (size_t)b, pairs);
        out[t] = kx_zero();
        for (int p = 0; p < 4; p++) {
            out[t] = kx_dot16(out[t], w[p], kx_set1(pairs[p]));
        }
    }
}

/* the types with a second term (d_min times the mins' dot) */
INLINE int kx8_has_mins(int type) {
    return type == LLAMAY_TYPE_Q2_K || type == LLAMAY_TYPE_Q4_K || type == LLAMAY_TYPE_Q5_K;
}

/* The weights' terms of the 16-element activation sums: acc[t] += each row's int16 pair p
   (pair_of, an expression of p) times token t's sums of sub-blocks 2p, 2p + 1. */
#define KX8_SUB_BLOCK_SUMS(pair_of, acc)                                                        \
    for (int p = 0; p < 8; p++) {                                                               \
        const kx_i pair = (pair_of);                                                            \
        for (int t = 0; t < nt; t++) {                                                          \
            int32_t sums; /* an int16 pair, as they lie */                                      \
            memcpy(&sums, a[t]->sum + 16 * (size_t)b + 2 * p, sizeof sums);                     \
            (acc)[t] = kx_dot16((acc)[t], pair, kx_set1(sums));                                 \
        }                                                                                       \
    }

/* Chunks are taken four at a time, unrolled: within a super-block's four, the bit shifts,
   scale halves and sub-block ends are known when compiling (Q3_K's shifts had compiled to a
   jump table). Eight at a time keeps more registers live than there are. */
#define KX8_UNROLL 4

/* The lines a decode pass asks for ahead of a super-block (kx8_ahead_of): `bytes` at `far`
   into L2 and at `near` into L1 (llamay_prefetch_lines), for each of `streams` streams `other`
   bytes apart (two groups read side by side). */
typedef struct {
    const uint8_t *far, *near;
    size_t other, bytes;
    int streams;
} kx8_ahead;

/* Part k of `parts` of those lines (llamay_prefetch_part), asked for as the pass reaches chunk
   32 k / parts: asked all at once as a super-block begins, two groups' lines come in a burst
   that holds the line-fill buffers and stalls the arithmetic behind it. */
INLINE void kx8_ask_part(const kx8_ahead *ahead, int k, int parts) {
    if (ahead == NULL) {
        return;
    }
    for (int s = 0; s < ahead->streams; s++) {
        const size_t at = (size_t)s * ahead->other;
        llamay_prefetch_part(ahead->far + at, ahead->near + at, ahead->bytes, k, parts);
    }
    /* the part stays where it is asked: an empty volatile asm, across which the compiler
       schedules nothing. In a super-block unrolled whole, GCC had gathered its 38 prefetches at
       the start, a burst that filled the miss buffers (AVX2's one-token step from memory 0.57
       times as fast). */
    __asm__ volatile("" ::: "memory");
}

/* the super-block at g (and next), expanded into e as above */
INLINE void kx8_expand(int type, const uint8_t *g, const uint8_t *next, kx_i *e) {
    const int per = kx8_chunks_per_scale(type);
    const int biased = kx8_biased(type);
    const kx_i offset = kx_set1_8((char)kx8_code_offset(type)), ones = kx_set1_8(1);
    kx_i codes = kx_zero(), term = kx_zero(); /* Q_j, then sum_j sc_j Q_j */
    for (int c0 = 0; c0 < 32; c0 += KX8_UNROLL) {
#pragma GCC unroll 4
        for (int k = 0; k < KX8_UNROLL; k++) {
            const int c = c0 + k;
            if (c % per == 0) {
                e[KX8_SCALES + c / per] = kx8_scale_of(type, g, next, c / per);
            }
            kx8_assemble(type, g, next, c, &e[2 * c], &e[2 * c + 1]);
            if (biased) {
                e[2 * c] = kx_sub8(e[2 * c], offset);
                e[2 * c + 1] = kx_sub8(e[2 * c + 1], offset);
                codes = kx_chunk(codes, ones, ones, e[2 * c], e[2 * c + 1]);
                if ((c + 1) % per == 0) {
                    term = kx_add32(term, kx_scaled(codes, e[KX8_SCALES + c / per]));
                    codes = kx_zero();
                }
            }
        }
    }
    if (biased) {
        e[KX8_OFFSET] = kx_slli32(term, 7);
    }
}

/* Chunks between two parts of the lines asked for ahead: a part a chunk for one token, a part
   every two chunks for more, whose chunks take longer. */
#define KX8_ASK_EVERY(nt) ((nt) > 1 ? 2 : 1)

/* Chunks c0 to c0 + 3 of kx8_ints: the products of each token's activations with them, the
   partial sums taken into i1 as sub-blocks end */
INLINE void kx8_four_chunks(int type, const kx_i *e, const uint8_t *g, const uint8_t *next,
                            const int8_t *const *x, const int nt, int c0, kx_i *partial,
                            kx_i *i1, const kx8_ahead *ahead) {
    const int per = kx8_chunks_per_scale(type);
    const int chunks_per_sum = type == LLAMAY_TYPE_Q6_K   ? KX_Q6_K_CHUNKS_PER_SUM
                               : type == LLAMAY_TYPE_Q5_K ? KX_Q5_K_CHUNKS_PER_SUM
                                                          : per;
    kx_i scale = kx_zero();
#pragma GCC unroll 4
    for (int k = 0; k < KX8_UNROLL; k++) {
        const int c = c0 + k;
        if (k % KX8_ASK_EVERY(nt) == 0) {
            kx8_ask_part(ahead, c / KX8_ASK_EVERY(nt), 32 / KX8_ASK_EVERY(nt));
        }
        if (c % per == 0) {
            scale = e ? e[KX8_SCALES + c / per] : kx8_scale_of(type, g, next, c / per);
        }
        kx_i lo, hi;
        if (e) {
            lo = e[2 * c];
            hi = e[2 * c + 1];
        } else {
            kx8_assemble(type, g, next, c, &lo, &hi);
        }
#ifdef KX_SIGNED_IQ4_XS
        if (type == LLAMAY_TYPE_IQ4_XS) {
            kx8_chunk_tokens_signed(lo, hi, x, nt, c, scale, i1);
            continue;
        }
#endif
        if (e && kx8_biased(type)) { /* the activations unsigned, the codes signed */
            kx8_chunk_tokens_biased(lo, hi, x, nt, c, partial);
        } else {
            kx8_chunk_tokens(lo, hi, x, nt, c, partial);
        }
        if ((c % per + 1) % chunks_per_sum == 0) {
            kx8_take_partials(partial, scale, nt, i1);
        }
    }
}

/* The integer dot products of one super-block with nt tokens' activations: i1[t] (and, for
   Q2_K, Q4_K and Q5_K, i2[t] = -the min term), its quants read from the expansion e, or (e
   NULL) assembled from the block as they are used. */
INLINE void kx8_ints(int type, const kx_i *e, const uint8_t *g, const uint8_t *next,
                     const llamay_act_q *const *a, int b, const int nt, kx_i *i1, kx_i *i2,
                     const kx8_ahead *ahead) {
    const int per = kx8_chunks_per_scale(type);
    const int8_t *x[KX_TOKENS];
    kx_i partial[KX_TOKENS];
    for (int t = 0; t < nt; t++) {
        x[t] = a[t]->qs + 256 * (size_t)b;
        i1[t] = kx_zero();
        partial[t] = kx_zero();
    }
    if (e == NULL) {
        /* assembled as read (decode): the whole super-block unrolled, so that the parts of the
           lines asked ahead, the bit shifts and the sub-block ends are all constants */
#pragma GCC unroll 8
        for (int c0 = 0; c0 < 32; c0 += KX8_UNROLL) {
            kx8_four_chunks(type, e, g, next, x, nt, c0, partial, i1, ahead);
        }
    } else { /* expanded (prefill): four chunks a turn (unrolled whole, 0.97 times as fast) */
        for (int c0 = 0; c0 < 32; c0 += KX8_UNROLL) {
            kx8_four_chunks(type, e, g, next, x, nt, c0, partial, i1, ahead);
        }
    }
    if (e && kx8_biased(type)) {
        for (int t = 0; t < nt; t++) {
            i1[t] = kx_sub32(i1[t], e[KX8_OFFSET]);
        }
        return;
    }
    if (type == LLAMAY_TYPE_Q2_K) {
        for (int t = 0; t < nt; t++) {
            i2[t] = kx_zero();
        }
        KX8_SUB_BLOCK_SUMS(kx8_q2_K_nibbles(g, next, p, 1), i2);
        for (int t = 0; t < nt; t++) {
            i2[t] = kx_sub32(kx_zero(), i2[t]);
        }
        return;
    }
    if (type == LLAMAY_TYPE_IQ4_XS) {
#if !defined(KX_SIGNED_IQ4_XS) && !defined(KX_SIGNED_DOT)
        /* i1 = sum sc (w + 128) x - 128 sum sc B over the sub-blocks */
        kx_i scales[4], offset[KX_TOKENS];
        for (int p = 0; p < 4; p++) {
            scales[p] = kx_load_pairs_i8(g, next, LLAMAY_KX8_IQ4_XS_SCALES + 16 * p);
        }
        kx8_sums32(scales, a, b, nt, offset);
        for (int t = 0; t < nt; t++) {
            i1[t] = kx_sub32(i1[t], kx_slli32(offset[t], 7));
        }
#endif
        return;
    }
    if (per == 4) { /* Q4_K, Q5_K */
        kx_i mins[4];
        for (int p = 0; p < 4; p++) {
            mins[p] = kx_load_pairs_u8(g, next, LLAMAY_KX8_Q4_K_MINS + 16 * p);
        }
        kx8_sums32(mins, a, b, nt, i2);
        for (int t = 0; t < nt; t++) {
            i2[t] = kx_sub32(kx_zero(), i2[t]);
        }
        return;
    }
    /* Q6_K (Q3_K): i1 = sum sc (q - 32) x (q - 4), as sum sc q x - 32 (4) sum sc B over the
       sub-blocks; the two keep their scales in the same place */
    kx_i offset[KX_TOKENS];
    for (int t = 0; t < nt; t++) {
        offset[t] = kx_zero();
    }
    KX8_SUB_BLOCK_SUMS(kx_load_pairs_i8(g, next, LLAMAY_KX8_Q6_K_SCALES + 16 * p), offset);
    for (int t = 0; t < nt; t++) {
        offset[t] = type == LLAMAY_TYPE_Q6_K ? kx_slli32(offset[t], 5) : kx_slli32(offset[t], 2);
        i1[t] = kx_sub32(i1[t], offset[t]);
    }
}

/* dst = src + 128, as unsigned bytes (n a multiple of 256) */
INLINE void kx8_add_128(const int8_t *src, int8_t *dst, int n) {
#ifdef KX8_NEON
    for (int i = 0; i < n; i += 16) {
        vst1q_s8(dst + i, veorq_s8(vld1q_s8(src + i), vdupq_n_s8((int8_t)0x80)));
    }
#else
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int i = 0; i < n; i += 32) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_xor_si256(v, flip));
    }
#endif
}

/* Bytes from a group's super-block to the same super-block of the next group, which fills
   lanes 8-15 where `two` is set; 0 reads the same group into them. */
INLINE size_t kx8_next_group(int type, int nb, int two) {
    return two ? (size_t)nb * (size_t)llamay_kx8_block_bytes(type) : 0;
}

/* Where the group at g's stream, read side by side with the group after it (next_group bytes
   on), is `ahead` bytes after its super-block b: past the group's end, in the pair after. */
INLINE const uint8_t *kx8_paired_stream(const uint8_t *g, size_t next_group, int b,
                                        size_t block_bytes, size_t ahead) {
    const uint8_t *pair = g - (size_t)b * block_bytes;
    size_t at = (size_t)b * block_bytes + ahead;
    while (at >= next_group) {
        at -= next_group;
        pair += 2 * next_group;
    }
    return pair + at;
}

/* The lines to ask for ahead of super-block b of the group at g, read from memory. Alone, a
   group's blocks lie end to end and so do the groups: the bytes a fixed distance on. Read side
   by side with the group after it (next_group bytes on, a group's size), past its group's end
   each stream jumps over the other: the pair after this one is read next. A fixed distance there
   landed in the other group's blocks, already read, and left every second group of the next pair
   to the demand misses. Each stream asks twice the one-stream distance ahead: its bytes come
   at half the rate of one stream's, and the memory has as much in flight for it. */
INLINE kx8_ahead kx8_ahead_of(int type, const uint8_t *g, size_t next_group, int b) {
    const size_t block_bytes = (size_t)llamay_kx8_block_bytes(type);
    if (!next_group) {
        return (kx8_ahead){g + LLAMAY_PREFETCH_AHEAD,
                           g + llamay_prefetch_l1_ahead(LLAMAY_PREFETCH_AHEAD), 0, block_bytes, 1};
    }
    const size_t far_ahead = 2 * LLAMAY_PREFETCH_AHEAD;
    return (kx8_ahead){
        kx8_paired_stream(g, next_group, b, block_bytes, far_ahead),
        kx8_paired_stream(g, next_group, b, block_bytes, llamay_prefetch_l1_ahead(far_ahead)),
        next_group, block_bytes, 2};
}

/* KX_ROWS rows from r0 (the group holding r0, and with sixteen lanes the group after it, or
   the same group again where `two` is 0) against nt tokens: their accumulators' trees, a
   vector of rows per token, into out[t]. expanded: the rows' super-blocks, expanded, or NULL
   to expand each as it is read (decode: every byte read once). */
INLINE void kx8_group(int type, const llamay_weight *w, const llamay_act_q *const *a, int r0,
                      int two, const int nt, kx_f *out, const kx_i *expanded) {
    const int nb = w->n_cols / 256;
    const size_t next_group = kx8_next_group(type, nb, two);
    kx_f acc[KX_TOKENS][LLAMAY_QUANT_LANES];
    for (int t = 0; t < nt; t++) {
        for (int l = 0; l < LLAMAY_QUANT_LANES; l++) {
            acc[t][l] = kx_fzero();
        }
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *g = llamay_kx8_block(w, r0, b), *next = g + next_group;
        kx_i i1[KX_TOKENS], i2[KX_TOKENS];
        if (expanded) {
            kx8_ints(type, expanded + (size_t)b * KX8_EXPANDED, g, next, a, b, nt, i1, i2, NULL);
        } else {
            const kx8_ahead ahead = kx8_ahead_of(type, g, next_group, b);
            kx8_ints(type, NULL, g, next, a, b, nt, i1, i2, &ahead);
        }
        const kx_f d = kx_load_f16(g, next, 0);
        const int lane = b % LLAMAY_QUANT_LANES;
        for (int t = 0; t < nt; t++) {
            acc[t][lane] = kx_fstep(acc[t][lane], d, a[t]->d[b], i1[t]);
            if (kx8_has_mins(type)) {
                acc[t][lane] = kx_fstep(acc[t][lane], kx_load_f16(g, next, 16), a[t]->d[b], i2[t]);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        out[t] = kx8_tree8(acc[t]);
    }
}

/* Decode steps of up to this many tokens read one group at a time (with sixteen lanes, the
   group twice) where the prefetches go straight into L1 (llamay_prefetch_near_into_l1 unset:
   AMD's cores before Zen 4, which have no sixteen lanes), assembling each super-block's bits in registers as they read it: there one group's
   range streamed at the memory's rate and two groups' ranges at once did not. Where the far
   lines go to L2 (Intel), two ranges stream as fast as one, and two groups halve the
   arithmetic. Steps of more than KX8_DIRECT_TOKENS tokens expand a group's (or two groups')
   super-blocks once, then share them, KX8_EXPANDED_TOKENS at a time. */
#define KX8_ONE_GROUP_TOKENS 4

/* Steps of up to this many tokens (a prompt-lookup step's drafts, or 9-16 sequences) read the
   packed super-blocks in passes of KX_TOKENS, each assembling the bits as it reads (the
   group's blocks still in cache for the second pass): two assemblies cost less than an
   expansion written and read back; with more passes, one expansion costs as much or less. */
#define KX8_DIRECT_TOKENS (2 * KX_TOKENS)

/* Whether sixteen lanes hold two groups for n_tok tokens. Q3_K and Q2_K always take two:
   their codes cost several shifts a chunk (two arrays for Q3_K), so that even one token's
   step is bound by the arithmetic, which two groups halve. */
INLINE int kx8_two_groups(int type, int n_tok) {
    return KX_ROWS > LLAMAY_KX8_ROWS &&
           (n_tok > KX8_ONE_GROUP_TOKENS || llamay_prefetch_near_into_l1 ||
            type == LLAMAY_TYPE_Q3_K || type == LLAMAY_TYPE_Q2_K);
}

/* Rows [row_begin, row_end) (row_begin a multiple of 8: threads split rows by 16) x n_tokens. */
INLINE void kx8_kernel(int type, const llamay_weight *w, const uint8_t *act, int n_tokens,
                       float *out, size_t out_stride, int row_begin, int row_end) {
    /* the results of a block of sixteen rows, stored a cache line per token: the tokens'
       output rows may lie a power of two apart, in one cache set */
    float results[TOKEN_CHUNK][LLAMAY_ROW_BLOCK];
    llamay_act_q acts[TOKEN_CHUNK];
    const int nb = w->n_cols / 256;
    /* the thread's scratch (matmul.h): the expanded super-blocks, then for kx8_biased types the
       chunk's activations plus 128; without it (no memory), each pass expands what it reads */
    kx_i *expanded = NULL;
    int8_t *biased = NULL;
    if (n_tokens > KX8_DIRECT_TOKENS) {
        const size_t expanded_bytes = (size_t)nb * KX8_EXPANDED * sizeof(kx_i);
        const size_t biased_bytes = kx8_biased(type) ? (size_t)TOKEN_CHUNK * (size_t)w->n_cols : 0;
        expanded = llamay_matmul_scratch(expanded_bytes + biased_bytes);
        if (expanded != NULL && biased_bytes) {
            biased = (int8_t *)expanded + expanded_bytes;
        }
    }
    for (int t0 = 0; t0 < n_tokens; t0 += TOKEN_CHUNK) {
        const int n_tok = n_tokens - t0 < TOKEN_CHUNK ? n_tokens - t0 : TOKEN_CHUNK;
        /* a chunk of more than KX8_DIRECT_TOKENS shares expanded super-blocks (and,
           kx8_biased, reads the biased activations); a shorter one assembles as it reads */
        const int expands = expanded != NULL && n_tok > KX8_DIRECT_TOKENS;
        for (int t = 0; t < n_tok; t++) {
            acts[t] = llamay_act_q_of(w, act, t0 + t);
            if (biased != NULL && expands) {
                int8_t *row = biased + (size_t)t * (size_t)w->n_cols;
                kx8_add_128(acts[t].qs, row, w->n_cols);
                acts[t].qs = row;
            }
        }
        for (int r0 = row_begin; r0 < row_end; r0 += LLAMAY_ROW_BLOCK) {
            const int n_rows = row_end - r0 < LLAMAY_ROW_BLOCK ? row_end - r0 : LLAMAY_ROW_BLOCK;
            for (int g = 0, two; g < n_rows; g += two ? KX_ROWS : LLAMAY_KX8_ROWS) {
                two = kx8_two_groups(type, n_tok) && n_rows - g > LLAMAY_KX8_ROWS;
                const kx_i *e = NULL;
                if (expands) {
                    const size_t next_group = kx8_next_group(type, nb, two);
                    for (int b = 0; b < nb; b++) {
                        const uint8_t *block = llamay_kx8_block(w, r0 + g, b);
                        /* all at once: expanding is a short loop of bit assembly */
                        const kx8_ahead ahead = kx8_ahead_of(type, block, next_group, b);
                        kx8_ask_part(&ahead, 0, 1);
                        kx8_expand(type, block, block + next_group,
                                   expanded + (size_t)b * KX8_EXPANDED);
                    }
                    e = expanded;
                }
                const int pass = e != NULL ? KX8_EXPANDED_TOKENS : KX_TOKENS;
                for (int t = 0; t < n_tok; t += pass) {
                    const llamay_act_q *a[KX_TOKENS];
                    kx_f v[KX_TOKENS];
                    const int nt = n_tok - t < pass ? n_tok - t : pass;
                    for (int k = 0; k < nt; k++) {
                        a[k] = &acts[t + k];
                    }
                    /* a constant count: the token loops unroll into registers */
#define KX8_CASE(n)                                                                             \
    case n: kx8_group(type, w, a, r0 + g, two, n, v, e); break;
                    switch (nt) {
                    KX8_CASE(1)
                    KX8_CASE(2)
                    KX8_CASE(3)
                    KX8_CASE(4)
                    KX8_CASE(5)
                    KX8_CASE(6)
                    KX8_CASE(7)
                    default: kx8_group(type, w, a, r0 + g, two, KX_TOKENS, v, e); break;
                    }
#undef KX8_CASE
                    for (int k = 0; k < nt; k++) {
                        kx_store_rows(&results[t + k][g], v[k], two);
                    }
                }
            }
            llamay_store_results(out, out_stride, t0, n_tok, r0, n_rows, results);
        }
    }
}
