/* AVX-512 kernels (F, BW, DQ, VL, VNNI): the same bits as matmul_ref.c, faster.

   Integer dot products use VNNI: vpdpbusd (unsigned x signed bytes into int32) for the
   32-element formats, whose weights are made unsigned by an offset that is taken back exactly
   with the activation block's sum, and for Q2_K..Q6_K (matmul_kx8.h: sixteen rows per zmm,
   then vpmulld by each sub-block's scale); vpmaddubsw + vpdpwssd for the other 256-element
   types, which folds each sub-block's scale into the int32 accumulation. Integer sums are exact in
   any order, so only the fp32 steps need to follow the reference: per block b, fmaf into lane
   b % 8.

   32-element formats read the packed weights (matmul_kernels.h): in a group of eight blocks,
   32-bit lane j (and j + 8) of every vpdpbusd is block j, so the eight lanes of one ymm
   accumulator are the eight canonical lanes, with no horizontal sums and no gathers.
   The other 256-element formats read the GGUF blocks: one super-block's integers at a time, reduced
   eight at a time (eight tokens in prefill, eight rows in decode) so that the fp32 steps run
   with tokens or rows as lanes. */
#include "matmul_kernels.h"

#if LLAMAY_WITH_AVX512
#if !LLAMAY_TARGETS_AVX512
#error "matmul_avx512.c is compiled with the AVX-512 set's flags (setup.py)"
#endif

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "fp16.h"
#include "iq_tables.h"
#include "quants.h"

#define INLINE static inline __attribute__((always_inline))

/* Tokens whose accumulators are kept while a tile of weight rows is decoded once. */
#define TOKEN_CHUNK 64

INLINE float tree8_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE float tree16_ps(__m512 v) {
    return tree8_ps(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* llamay_tree8 of eight accumulators held lane by lane: lane i of the result is the tree of
   lane i of a[0..7] */
INLINE __m256 tree8_across(const __m256 a[8]) {
    const __m256 s0 = _mm256_add_ps(a[0], a[4]), s1 = _mm256_add_ps(a[1], a[5]);
    const __m256 s2 = _mm256_add_ps(a[2], a[6]), s3 = _mm256_add_ps(a[3], a[7]);
    return _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
}

INLINE int32_t hsum_epi32(__m512i v) { return _mm512_reduce_add_epi32(v); }

/* ======================= fp32 weights: F32, F16, BF16 ======================= */

INLINE __m512 load_weights16(int type, const uint8_t *row, int i, __mmask16 k) {
    switch (type) {
    case LLAMAY_TYPE_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, row + 2 * (size_t)i));
    case LLAMAY_TYPE_BF16: {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, row + 2 * (size_t)i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
    default: return _mm512_maskz_loadu_ps(k, row + 4 * (size_t)i);
    }
}

/* rows x tokens outputs; element i into lane i % 16, the tail's missing lanes left untouched */
INLINE void float_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int r0,
                       float *out, size_t out_stride, const int rows, const int tokens) {
    __m512 acc[4][4];
    const uint8_t *wrow[4];
    const float *x[4];
    for (int r = 0; r < rows; r++) {
        wrow[r] = w->data + (size_t)(r0 + r) * w->row_bytes;
        for (int t = 0; t < tokens; t++) {
            acc[r][t] = _mm512_setzero_ps();
        }
    }
    for (int t = 0; t < tokens; t++) {
        x[t] = (const float *)(act + (size_t)(t0 + t) * w->act_row_bytes);
    }
    const int n = w->n_cols;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 xv[4];
        for (int t = 0; t < tokens; t++) {
            xv[t] = _mm512_loadu_ps(x[t] + i);
        }
        for (int r = 0; r < rows; r++) {
            const __m512 wv = load_weights16(type, wrow[r], i, 0xFFFF);
            for (int t = 0; t < tokens; t++) {
                acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
            }
        }
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        for (int r = 0; r < rows; r++) {
            const __m512 wv = load_weights16(type, wrow[r], i, k);
            for (int t = 0; t < tokens; t++) {
                const __m512 xv = _mm512_maskz_loadu_ps(k, x[t] + i);
                acc[r][t] = _mm512_mask3_fmadd_ps(wv, xv, acc[r][t], k);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        for (int t = 0; t < tokens; t++) {
            out[(size_t)(t0 + t) * out_stride + r0 + r] = tree16_ps(acc[r][t]);
        }
    }
}

/* the prefill tile: four rows by four tokens, sixteen accumulators */
#define FLOAT_TILE_ROWS 4
#define FLOAT_TILE_TOKENS 4

/* ======================= 32-element formats x Q8_0, packed ======================= */

/* The weights are fed to vpdpbusd as unsigned bytes v + 2^shift; 2^shift times the activation
   block's sum is subtracted from the integer sum (0: no offset). */
INLINE int offset_shift32(int type) {
    switch (type) {
    case LLAMAY_TYPE_Q4_0: return 3;
    case LLAMAY_TYPE_Q5_0: return 4;
    case LLAMAY_TYPE_Q4_1:
    case LLAMAY_TYPE_Q5_1: return 0;
    default: return 7; /* Q8_0 and the lookup types */
    }
}

INLINE __m512i lookup_table(const int8_t values[16]) {
    uint8_t biased[16];
    for (int i = 0; i < 16; i++) {
        biased[i] = (uint8_t)(values[i] + 128);
    }
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)biased));
}

/* MXFP4's E8M0 exponents of a group's n blocks, as llamay_e8m0_to_fp32_half. */
INLINE __m256 e8m0_halves8(const uint8_t *exponents, int n) {
    const __m128i bytes = n == 8 ? _mm_loadl_epi64((const __m128i *)exponents)
                                 : _mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1), exponents);
    const __m256i e = _mm256_cvtepu8_epi32(bytes);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __mmask8 small = _mm256_cmplt_epi32_mask(e, _mm256_set1_epi32(2));
    return _mm256_castsi256_ps(_mm256_mask_blend_epi32(small, normal, subnormal));
}

/* a group's n fp16 values */
INLINE __m256 halves8(const uint8_t *p, int n) {
    return _mm256_cvtph_ps(n == 8 ? _mm_loadu_si128((const __m128i *)p)
                                  : _mm_maskz_loadu_epi16((__mmask8)((1u << n) - 1), p));
}

/* Quants vector k of a group of n blocks (matmul_kernels.h): chunks 2k and 2k+1, their 4n
   bytes each expanded to lanes 0..n-1 and 8..n+7. */
INLINE __m512i quants64(const uint8_t *group, int n, int k) {
    if (n == 8) {
        return _mm512_loadu_si512(group + 64 * k);
    }
    const __mmask16 lanes = (__mmask16)(((1u << n) - 1) * 0x101u);
    return _mm512_maskz_expandloadu_epi32(lanes, group + 8 * n * k);
}

/* The fifth bits of quants vector k as a byte mask: chunk 2k's 4n bits at bit 0, chunk
   2k+1's at bit 32. */
INLINE uint64_t fifth_bits64(const uint8_t *fifth, int n, int k) {
    if (n == 8) {
        uint64_t bits;
        memcpy(&bits, fifth + 8 * k, sizeof bits);
        return bits;
    }
    const uint64_t both = llamay_read_bits(fifth, 8 * n * k, 8 * n);
    return (both & ((1ull << (4 * n)) - 1)) | (both >> (4 * n)) << 32;
}

typedef struct {
    __m512i w[4]; /* the group's 256 quants + offset, in the interleaved order */
    __m256 d;     /* the blocks' scales */
    __m256 m;     /* their mins (Q4_1, Q5_1) */
} group32;

/* a group of n blocks; lanes past n hold anything (group_step leaves them out) */
INLINE void load_group32(int type, const uint8_t *group, int n, __m512i table, group32 *G) {
    if (type == LLAMAY_TYPE_Q8_0) {
        const __m512i sign = _mm512_set1_epi8((char)0x80);
        for (int k = 0; k < 4; k++) {
            G->w[k] = _mm512_xor_si512(quants64(group, n, k), sign);
        }
    } else {
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 2; h++) {
            const __m512i z = quants64(group, n, h);
            G->w[2 * h] = _mm512_and_si512(z, low4);
            G->w[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), low4);
        }
        if (type == LLAMAY_TYPE_IQ4_NL || type == LLAMAY_TYPE_MXFP4) {
            for (int k = 0; k < 4; k++) {
                G->w[k] = _mm512_shuffle_epi8(table, G->w[k]);
            }
        }
        if (llamay_packed_has_fifth_bits(type)) {
            const uint8_t *fifth = group + llamay_packed_fifth_bits_offset(type, n);
            for (int k = 0; k < 4; k++) {
                const uint64_t bits = fifth_bits64(fifth, n, k);
                G->w[k] = _mm512_mask_add_epi8(G->w[k], bits, G->w[k], _mm512_set1_epi8(16));
            }
        }
    }
    const uint8_t *scales = group + llamay_packed_scales_offset(type, n);
    G->d = type == LLAMAY_TYPE_MXFP4 ? e8m0_halves8(scales, n) : halves8(scales, n);
    if (llamay_packed_has_mins(type)) {
        G->m = halves8(group + llamay_packed_mins_offset(type, n), n);
    }
}

/* acc's lanes k (the group's blocks present) += each block's terms with the activation's
   interleaved quants, scales and sums at group g. */
INLINE __m256 group_step(int type, const group32 *G, const llamay_act_q *a, int g, __mmask8 k,
                         __m256 acc) {
    const int8_t *qs = a->qs + 256 * g;
    const float *d = a->d + 8 * g;
    const int16_t *sum = a->sum + 8 * g;
    __m512i dot[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}; /* two chains */
    for (int k = 0; k < 4; k++) {
        dot[k % 2] = _mm512_dpbusd_epi32(dot[k % 2], G->w[k], _mm512_loadu_si512(qs + 64 * k));
    }
    const __m512i lanes = _mm512_add_epi32(dot[0], dot[1]); /* lanes j and j + 8: block j */
    __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(lanes),
                                    _mm512_extracti64x4_epi64(lanes, 1));
    const __m256 da = _mm256_loadu_ps(d);
    const __m256i asum = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)sum));
    if (offset_shift32(type)) {
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(asum, offset_shift32(type)));
    }
    acc = _mm256_mask3_fmadd_ps(_mm256_mul_ps(G->d, da), _mm256_cvtepi32_ps(isum), acc, k);
    if (llamay_packed_has_mins(type)) {
        acc = _mm256_mask3_fmadd_ps(_mm256_mul_ps(G->m, da), _mm256_cvtepi32_ps(asum), acc, k);
    }
    return acc;
}

/* the lanes of a group of n blocks */
INLINE __mmask8 present(int n) { return (__mmask8)((1u << n) - 1); }

/* Rows are walked whole groups first, their layout known at compile time, then the partial
   group that ends a row whose blocks are not a multiple of eight. */

/* Decode: group g (of n blocks) of one row against one token. */
INLINE __m256 row_group(int type, const uint8_t *row, const llamay_act_q *a, int g, int n,
                        __m512i table, __m256 acc) {
    group32 G;
    load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G);
    return group_step(type, &G, a, g, present(n), acc);
}

/* Decode: one row against one token, the accumulator in a register. */
INLINE float q32_row(int type, const llamay_weight *w, const llamay_act_q *a, int r,
                     __m512i table) {
    const int nb = w->n_cols / 32;
    const uint8_t *row = w->packed + (size_t)r * w->packed_row_bytes;
    __m256 acc = _mm256_setzero_ps();
    int g = 0;
    for (; g < nb / 8; g++) { /* rows lie end to end: the next row's lines are asked for */
        llamay_prefetch_ahead_part(row, w->packed_row_bytes, g, (nb + 7) / 8);
        acc = row_group(type, row, a, g, 8, table, acc);
    }
    if (nb % 8) {
        llamay_prefetch_ahead_part(row, w->packed_row_bytes, g, (nb + 7) / 8);
        acc = row_group(type, row, a, g, nb % 8, table, acc);
    }
    return tree8_ps(acc);
}

/* Decode of a few tokens: one row decoded once per group for every token's dot, each token's
   accumulator as q32_row keeps it (the same order, so the same bits). */
#define MATMUL_Q32_ROW_TOKENS 1

INLINE void q32_row_tokens(int type, const llamay_weight *w, const llamay_act_q *a, int n_tok,
                           int r, __m512i table, float (*results)[LLAMAY_ROW_BLOCK], int column) {
    const int nb = w->n_cols / 32;
    const uint8_t *row = w->packed + (size_t)r * w->packed_row_bytes;
    __m256 acc[LLAMAY_DECODE_TOKENS];
    for (int t = 0; t < n_tok; t++) {
        acc[t] = _mm256_setzero_ps();
    }
    for (int g = 0; g * 8 < nb; g++) {
        const int n = nb - g * 8 < 8 ? nb - g * 8 : 8;
        llamay_prefetch_ahead_part(row, w->packed_row_bytes, g, (nb + 7) / 8);
        group32 G;
        load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G);
        for (int t = 0; t < n_tok; t++) {
            acc[t] = group_step(type, &G, &a[t], g, present(n), acc[t]);
        }
    }
    for (int t = 0; t < n_tok; t++) {
        results[t][column] = tree8_ps(acc[t]);
    }
}

/* Prefill: group g (of n blocks) of a tile of `rows` weight rows, decoded once for every
   token of the chunk. */
INLINE void tile_group(int type, const llamay_weight *w, const uint8_t *act, int t0, int n_tok,
                       int r0, const int rows, int g, int n, __m256 (*acc)[TOKEN_CHUNK],
                       __m512i table) {
    group32 G[4];
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w->packed + (size_t)(r0 + r) * w->packed_row_bytes;
        load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G[r]);
    }
    const __mmask8 k = present(n);
    for (int t = 0; t < n_tok; t++) {
        const llamay_act_q a = llamay_act_q_of(w, act, t0 + t);
        for (int r = 0; r < rows; r++) {
            acc[r][t] = group_step(type, &G[r], &a, g, k, acc[r][t]);
        }
    }
}

/* Prefill: tiles of four rows (then one), each group decoded once for every token. */
#define Q32_TILE_ROWS 4

INLINE void q32_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int n_tok,
                     int r0, float (*results)[LLAMAY_ROW_BLOCK], int column, const int rows,
                     __m256 (*acc)[TOKEN_CHUNK], __m512i table) {
    const int nb = w->n_cols / 32;
    for (int r = 0; r < rows; r++) {
        for (int t = 0; t < n_tok; t++) {
            acc[r][t] = _mm256_setzero_ps();
        }
    }
    int g = 0;
    for (; g < nb / 8; g++) {
        tile_group(type, w, act, t0, n_tok, r0, rows, g, 8, acc, table);
    }
    if (nb % 8) {
        tile_group(type, w, act, t0, n_tok, r0, rows, g, nb % 8, acc, table);
    }
    for (int r = 0; r < rows; r++) {
        for (int t = 0; t < n_tok; t++) {
            results[t][column + r] = tree8_ps(acc[r][t]);
        }
    }
}

typedef __m512i q32_table;
typedef __m256 q32_acc;

INLINE q32_table q32_table_for(int type) {
    return lookup_table(type == LLAMAY_TYPE_MXFP4 ? kvalues_mxfp4 : kvalues_iq4nl);
}

/* ======================= 256-element formats x Q8_K ======================= */

/* A super-block of the other 256-element types (Q2_K..Q6_K and IQ4_XS are KX8's,
   matmul_kx8.h) decoded for the integer dot: i1 = sum_k dpwssd(maddubs(w[k], x[k]), sc[k]) +
   <bsums, corr>, where bsums are the activation's sixteen sums of 16 and corr takes the
   weights' offset back: -offset times each 16 elements' scale. The IQ2/IQ3 grids give
   magnitudes; their signs negate the activation's bytes (x[k] where neg[k] is set). */
typedef struct {
    __m512i w[4];    /* 256 unsigned weights in element order */
    __m512i sc[4];   /* per-element-pair int16 scales */
    __mmask64 neg[4];
    __m256i corr;    /* int16 per 16 elements */
    float d;
} super256;

INLINE int offset256(int type) {
    switch (type) {
    case LLAMAY_TYPE_TQ1_0:
    case LLAMAY_TYPE_TQ2_0: return 1;
    default: return 0;
    }
}

INLINE int has_signs256(int type) {
    switch (type) {
    case LLAMAY_TYPE_IQ2_XXS:
    case LLAMAY_TYPE_IQ2_XS:
    case LLAMAY_TYPE_IQ2_S:
    case LLAMAY_TYPE_IQ3_XXS:
    case LLAMAY_TYPE_IQ3_S: return 1;
    default: return 0;
    }
}

/* The grid types: 32 entries of eight magnitudes, a sign byte for each, a scale per 16. */
typedef struct {
    uint64_t grid[32];
    uint8_t signs[32];
    int16_t scales[16];
    float d;
} grid256;

INLINE void decode_grid256(int type, const uint8_t *row, int b, grid256 *q) {
    switch (type) {
    case LLAMAY_TYPE_IQ2_XXS: {
        const block_iq2_xxs *x = (const block_iq2_xxs *)row + b;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux[2];
            memcpy(aux, x->qs + 4 * ib, sizeof aux);
            for (int l = 0; l < 4; l++) {
                q->grid[4 * ib + l] = iq2xxs_grid[(aux[0] >> (8 * l)) & 0xFF];
                q->signs[4 * ib + l] = ksigns_iq2xs[(aux[1] >> (7 * l)) & 127];
            }
            q->scales[2 * ib] = q->scales[2 * ib + 1] = (int16_t)(2 * (aux[1] >> 28) + 1);
        }
        q->d = 0.125f * llamay_fp16_to_fp32(x->d);
        break;
    }
    case LLAMAY_TYPE_IQ2_XS: {
        const block_iq2_xs *x = (const block_iq2_xs *)row + b;
        for (int i = 0; i < 32; i++) {
            q->grid[i] = iq2xs_grid[x->qs[i] & 511];
            q->signs[i] = ksigns_iq2xs[x->qs[i] >> 9];
        }
        for (int ib = 0; ib < 8; ib++) {
            q->scales[2 * ib] = (int16_t)(2 * (x->scales[ib] & 0xF) + 1);
            q->scales[2 * ib + 1] = (int16_t)(2 * (x->scales[ib] >> 4) + 1);
        }
        q->d = 0.125f * llamay_fp16_to_fp32(x->d);
        break;
    }
    case LLAMAY_TYPE_IQ2_S: {
        const block_iq2_s *x = (const block_iq2_s *)row + b;
        for (int ib = 0; ib < 8; ib++) {
            for (int l = 0; l < 4; l++) {
                const int index = x->qs[4 * ib + l] | ((x->qh[ib] << (8 - 2 * l)) & 0x300);
                q->grid[4 * ib + l] = iq2s_grid[index];
                q->signs[4 * ib + l] = x->qs[32 + 4 * ib + l];
            }
            q->scales[2 * ib] = (int16_t)(2 * (x->scales[ib] & 0xF) + 1);
            q->scales[2 * ib + 1] = (int16_t)(2 * (x->scales[ib] >> 4) + 1);
        }
        q->d = 0.125f * llamay_fp16_to_fp32(x->d);
        break;
    }
    case LLAMAY_TYPE_IQ3_XXS: {
        const block_iq3_xxs *x = (const block_iq3_xxs *)row + b;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux;
            memcpy(&aux, x->qs + 64 + 4 * ib, sizeof aux);
            for (int l = 0; l < 4; l++) {
                q->grid[4 * ib + l] = iq3xxs_grid[x->qs[8 * ib + 2 * l]] |
                                      (uint64_t)iq3xxs_grid[x->qs[8 * ib + 2 * l + 1]] << 32;
                q->signs[4 * ib + l] = ksigns_iq2xs[(aux >> (7 * l)) & 127];
            }
            q->scales[2 * ib] = q->scales[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
        }
        q->d = 0.25f * llamay_fp16_to_fp32(x->d);
        break;
    }
    default: { /* IQ3_S */
        const block_iq3_s *x = (const block_iq3_s *)row + b;
        for (int ib = 0; ib < 8; ib++) {
            for (int l = 0; l < 4; l++) {
                const int i1 = x->qs[8 * ib + 2 * l] | ((x->qh[ib] << (8 - 2 * l)) & 256);
                const int i2 = x->qs[8 * ib + 2 * l + 1] | ((x->qh[ib] << (7 - 2 * l)) & 256);
                q->grid[4 * ib + l] = iq3s_grid[i1] | (uint64_t)iq3s_grid[i2] << 32;
                q->signs[4 * ib + l] = x->signs[4 * ib + l];
            }
            q->scales[2 * ib] = q->scales[2 * ib + 1] =
                (int16_t)(2 * ((x->scales[ib / 2] >> (4 * (ib % 2))) & 0xF) + 1);
        }
        q->d = llamay_fp16_to_fp32(x->d);
        break;
    }
    }
}

/* TQ1_0's base-3 digits (0..2) in element order: digit l of byte q is (uint8)(q * 3^l) * 3 >> 8 */
INLINE void tq1_0_digits(const block_tq1_0 *x, uint8_t digits[256]) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int l = 0; l < 5; l++) {
        for (int m = 0; m < 32; m++) {
            digits[32 * l + m] = (uint8_t)(((uint8_t)(x->qs[m] * pow3[l]) * 3) >> 8);
        }
        for (int m = 0; m < 16; m++) {
            digits[160 + 16 * l + m] = (uint8_t)(((uint8_t)(x->qs[32 + m] * pow3[l]) * 3) >> 8);
        }
    }
    for (int l = 0; l < 4; l++) {
        for (int j = 0; j < 4; j++) {
            digits[240 + 4 * l + j] = (uint8_t)(((uint8_t)(x->qh[j] * pow3[l]) * 3) >> 8);
        }
    }
}

/* int16 scales, one per 16 elements -> four vectors of int16 pairs: vector k covers elements
   64k..64k+63, whose 128-bit lane i holds the pairs of sub-block 4k + i */
INLINE void scales_per16(__m256i sc16, __m512i sc[4]) {
    static const int16_t lane_of_pair[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                             2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const __m512i base = _mm512_loadu_si512(lane_of_pair);
    const __m512i v = _mm512_castsi256_si512(sc16);
    for (int k = 0; k < 4; k++) {
        const __m512i index = _mm512_add_epi16(base, _mm512_set1_epi16((short)(4 * k)));
        sc[k] = _mm512_permutexvar_epi16(index, v);
    }
}

/* [q | q >> 2] (16-bit shifts: each byte's bits stay its own up to its top two) */
INLINE __m512i with_shifted2(__m256i q) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 2), 1);
}

/* TQ2_0's 64 bytes of 2-bit codes: bits 2s..2s+1 of byte 32c + l are
   element 128c + 32s + l */
INLINE void two_bit_codes(const uint8_t *qs, __m512i w[4]) {
    for (int c = 0; c < 2; c++) {
        const __m512i z = with_shifted2(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
        w[2 * c] = _mm512_and_si512(z, _mm512_set1_epi8(3));
        w[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), _mm512_set1_epi8(3));
    }
}

INLINE void load_super256(int type, const uint8_t *row, int b, super256 *S) {
    switch (type) {
    case LLAMAY_TYPE_TQ2_0:
    case LLAMAY_TYPE_TQ1_0: {
        if (type == LLAMAY_TYPE_TQ2_0) {
            const block_tq2_0 *x = (const block_tq2_0 *)row + b;
            two_bit_codes(x->qs, S->w);
            S->d = llamay_fp16_to_fp32(x->d);
        } else {
            const block_tq1_0 *x = (const block_tq1_0 *)row + b;
            uint8_t digits[256];
            tq1_0_digits(x, digits);
            for (int k = 0; k < 4; k++) {
                S->w[k] = _mm512_loadu_si512(digits + 64 * k);
            }
            S->d = llamay_fp16_to_fp32(x->d);
        }
        const __m256i ones = _mm256_set1_epi16(1);
        scales_per16(ones, S->sc);
        S->corr = _mm256_sub_epi16(_mm256_setzero_si256(), ones);
        break;
    }
    default: { /* IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S */
        grid256 q;
        decode_grid256(type, row, b, &q);
        for (int k = 0; k < 4; k++) {
            S->w[k] = _mm512_loadu_si512(q.grid + 8 * k);
            uint64_t neg;
            memcpy(&neg, q.signs + 8 * k, sizeof neg);
            S->neg[k] = neg;
        }
        scales_per16(_mm256_loadu_si256((const __m256i *)q.scales), S->sc);
        S->d = q.d;
        break;
    }
    }
}

/* The partial sums of i1 (any order: integers) for one token's super-block. */
INLINE __m512i k_dot(int type, const super256 *S, const int8_t *qs, __m256i bsums) {
    __m512i sum = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        __m512i x = _mm512_loadu_si512(qs + 64 * k);
        if (has_signs256(type)) {
            x = _mm512_mask_sub_epi8(x, S->neg[k], _mm512_setzero_si512(), x);
        }
        sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(S->w[k], x), S->sc[k]);
    }
    if (offset256(type)) {
        const __m512i corr = _mm512_zextsi256_si512(S->corr);
        sum = _mm512_dpwssd_epi32(sum, _mm512_zextsi256_si512(bsums), corr);
    }
    return sum;
}

/* Four vectors [8 partial sums of item 2p | of item 2p+1] -> the eight items' sums. */
INLINE __m256i reduce8(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    const __m512i q01 = _mm512_add_epi32(_mm512_shuffle_i64x2(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i64x2(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i q23 = _mm512_add_epi32(_mm512_shuffle_i64x2(p2, p3, _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i64x2(p2, p3, _MM_SHUFFLE(3, 1, 3, 1)));
    /* 128-bit lane k of q01 holds 4 partial sums of item k, of q23 of item 4 + k */
    const __m512i r =
        _mm512_add_epi32(_mm512_unpacklo_epi32(q01, q23), _mm512_unpackhi_epi32(q01, q23));
    const __m512i s = _mm512_add_epi32(r, _mm512_shuffle_epi32(r, _MM_PERM_BADC));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
}

/* eight vectors of sixteen partial sums -> their eight sums */
INLINE __m256i reduce8x16(const __m512i v[8]) {
    __m512i p[4];
    for (int i = 0; i < 4; i++) {
        const __m512i a = v[2 * i], b = v[2 * i + 1];
        p[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    return reduce8(p[0], p[1], p[2], p[3]);
}

/* One row against a chunk of tokens. Eight tokens at a time, the fp32 steps run with the
   tokens as lanes: acc8[group][l] holds lane l of eight tokens' accumulators. */
INLINE void k_row(int type, const llamay_weight *w, const uint8_t *act, int t0, int n_tok, int r,
                  float (*results)[LLAMAY_ROW_BLOCK], int column,
                  float (*scratch)[LLAMAY_QUANT_LANES]) {
    (void)scratch; /* the driver's per-token lanes: these accumulators live below instead */
    const int nb = w->n_cols / 256;
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    llamay_prefetch_ahead(row, w->row_bytes);
    const int n_vec = n_tok / 8 * 8;
    const size_t scales_offset = llamay_act_scales_offset(LLAMAY_ACT_Q8_K, w->n_cols);
    const __m256i row_offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                   _mm256_set1_epi32((int)w->act_row_bytes));
    __m256 acc8[TOKEN_CHUNK / 8][LLAMAY_QUANT_LANES];
    float acc1[8][LLAMAY_QUANT_LANES];
    for (int g = 0; g < n_vec / 8; g++) {
        for (int l = 0; l < LLAMAY_QUANT_LANES; l++) {
            acc8[g][l] = _mm256_setzero_ps();
        }
    }
    memset(acc1, 0, sizeof acc1);
    for (int b = 0; b < nb; b++) {
        super256 S;
        load_super256(type, row, b, &S);
        const int lane = b % LLAMAY_QUANT_LANES;
        for (int g = 0; g < n_vec / 8; g++) {
            const uint8_t *first = act + (size_t)(t0 + 8 * g) * w->act_row_bytes;
            __m512i sums[8];
            for (int i = 0; i < 8; i++) {
                const llamay_act_q a = llamay_act_q_of(w, act, t0 + 8 * g + i);
                const __m256i bsums = _mm256_loadu_si256((const __m256i *)(a.sum + 16 * (size_t)b));
                sums[i] = k_dot(type, &S, a.qs + 256 * (size_t)b, bsums);
            }
            const float *d = (const float *)(first + scales_offset) + b;
            const __m256 da = _mm256_i32gather_ps(d, row_offsets, 1);
            const __m256 i1 = _mm256_cvtepi32_ps(reduce8x16(sums));
            acc8[g][lane] =
                _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(S.d), da), i1, acc8[g][lane]);
        }
        for (int t = n_vec; t < n_tok; t++) {
            const llamay_act_q a = llamay_act_q_of(w, act, t0 + t);
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)(a.sum + 16 * (size_t)b));
            const int32_t i1 = hsum_epi32(k_dot(type, &S, a.qs + 256 * (size_t)b, bsums));
            float *acc = &acc1[t - n_vec][lane];
            *acc = fmaf(S.d * a.d[b], (float)i1, *acc);
        }
    }
    for (int g = 0; g < n_vec / 8; g++) {
        float lanes[8];
        _mm256_storeu_ps(lanes, tree8_across(acc8[g]));
        for (int i = 0; i < 8; i++) {
            results[8 * g + i][column] = lanes[i];
        }
    }
    for (int t = n_vec; t < n_tok; t++) {
        results[t][column] = llamay_tree8(acc1[t - n_vec]);
    }
}

/* Decode: eight rows against one token, the fp32 steps with the rows as lanes. */
INLINE __m256 k_rows8(int type, const llamay_weight *w, const llamay_act_q *a, int r0) {
    const int nb = w->n_cols / 256;
    __m256 acc[LLAMAY_QUANT_LANES];
    for (int l = 0; l < LLAMAY_QUANT_LANES; l++) {
        acc[l] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)(a->sum + 16 * (size_t)b));
        __m512i sums[8];
        float d[8];
        for (int i = 0; i < 8; i++) {
            super256 S;
            load_super256(type, w->data + (size_t)(r0 + i) * w->row_bytes, b, &S);
            sums[i] = k_dot(type, &S, a->qs + 256 * (size_t)b, bsums);
            d[i] = S.d;
        }
        const __m256 da = _mm256_set1_ps(a->d[b]);
        const int lane = b % LLAMAY_QUANT_LANES;
        const __m256 dw = _mm256_loadu_ps(d);
        const __m256 i1 = _mm256_cvtepi32_ps(reduce8x16(sums));
        acc[lane] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), i1, acc[lane]);
    }
    return tree8_across(acc);
}

INLINE void k_store8(float *out, __m256 v) { _mm256_storeu_ps(out, v); }

#define MATMUL_K_ROW 1
#define MATMUL_K_ROWS8 1

#define MATMUL_FN(name) avx512_##name
#define MATMUL_KERNEL_OF llamay_avx512_kernel
#define MATMUL_COLUMN(avx2, avx512, neon) avx512
#define KX8_AVX512 1
#include "matmul_kx8.h"
#include "matmul_driver.h"

#else

llamay_matmul_fn llamay_avx512_kernel(int type) {
    (void)type;
    return NULL;
}

#endif
