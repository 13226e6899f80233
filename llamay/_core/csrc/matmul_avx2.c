/* AVX2 kernels (with FMA and F16C): the same bits as matmul_ref.c, on CPUs without AVX-512.

   Integer dot products use vpmaddubsw (unsigned x signed bytes into int16 pairs, which must not
   saturate) then vpmaddwd (int16 pairs into int32, by ones or by the sub-block's scale).
   Signed weights (Q8_0, the lookup types) go through the sign trick |w| x sign(a, w); unsigned
   ones are offset as in the AVX-512 kernels. The integers equal the reference's exactly, so
   only the fp32 steps need to follow it: per block b, fmaf into lane b % 8. The 32-element
   formats read the packed weights, where 32-bit lane j of a chunk is block j. */
#include "matmul_kernels.h"

#if LLAMAY_WITH_AVX2
#if !LLAMAY_TARGETS_AVX2
#error "matmul_avx2.c is compiled with the AVX2 set's flags (setup.py)"
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

/* lanes [0, n) of -1, the rest 0 */
INLINE __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ======================= fp32 weights: F32, F16, BF16 ======================= */

INLINE int element_bytes(int type) { return type == LLAMAY_TYPE_F32 ? 4 : 2; }

INLINE __m256 load_weights8(int type, const uint8_t *p) {
    switch (type) {
    case LLAMAY_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    case LLAMAY_TYPE_BF16: {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    default: return _mm256_loadu_ps((const float *)p);
    }
}

/* rows x tokens outputs, sixteen lanes each as two registers; element i into lane i % 16 */
INLINE void float_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int r0,
                       float *out, size_t out_stride, const int rows, const int tokens) {
    __m256 acc[4][2][2];
    const uint8_t *wrow[4];
    const float *x[2];
    const int eb = element_bytes(type);
    for (int r = 0; r < rows; r++) {
        wrow[r] = w->data + (size_t)(r0 + r) * w->row_bytes;
        for (int t = 0; t < tokens; t++) {
            acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
        }
    }
    for (int t = 0; t < tokens; t++) {
        x[t] = (const float *)(act + (size_t)(t0 + t) * w->act_row_bytes);
    }
    const int n = w->n_cols;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int r = 0; r < rows; r++) {
            const __m256 w0 = load_weights8(type, wrow[r] + (size_t)i * eb);
            const __m256 w1 = load_weights8(type, wrow[r] + (size_t)(i + 8) * eb);
            for (int t = 0; t < tokens; t++) {
                acc[r][t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc[r][t][0]);
                acc[r][t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), acc[r][t][1]);
            }
        }
    }
    if (i < n) {
        /* the tail through zero-padded copies; lanes past the end keep their sums */
        const __m256i keep0 = first_lanes(n - i), keep1 = first_lanes(n - i - 8);
        float xs[2][16] = {{0}};
        for (int t = 0; t < tokens; t++) {
            memcpy(xs[t], x[t] + i, (size_t)(n - i) * sizeof(float));
        }
        for (int r = 0; r < rows; r++) {
            uint8_t ws[64] = {0};
            memcpy(ws, wrow[r] + (size_t)i * eb, (size_t)(n - i) * eb);
            const __m256 w0 = load_weights8(type, ws), w1 = load_weights8(type, ws + 8 * eb);
            for (int t = 0; t < tokens; t++) {
                const __m256 s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xs[t]), acc[r][t][0]);
                const __m256 s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xs[t] + 8), acc[r][t][1]);
                acc[r][t][0] = _mm256_blendv_ps(acc[r][t][0], s0, _mm256_castsi256_ps(keep0));
                acc[r][t][1] = _mm256_blendv_ps(acc[r][t][1], s1, _mm256_castsi256_ps(keep1));
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        for (int t = 0; t < tokens; t++) {
            out[(size_t)(t0 + t) * out_stride + r0 + r] =
                tree8_ps(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));
        }
    }
}

/* the prefill tile: two rows by two tokens, four accumulators of sixteen lanes */
#define FLOAT_TILE_ROWS 2
#define FLOAT_TILE_TOKENS 2

/* ======================= 32-element formats x Q8_0, packed ======================= */

/* Unsigned weights are v + 2^shift (0: none); signed ones (-1) use the sign trick. */
INLINE int offset_shift32(int type) {
    switch (type) {
    case LLAMAY_TYPE_Q4_0: return 3;
    case LLAMAY_TYPE_Q5_0: return 4;
    case LLAMAY_TYPE_Q4_1:
    case LLAMAY_TYPE_Q5_1: return 0;
    default: return -1; /* Q8_0 and the lookup types */
    }
}

INLINE __m256i lookup_table(const int8_t values[16]) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)values));
}

/* 32 fifth bits -> bytes of 0x10 where set */
INLINE __m256i fifth_bits32(uint32_t h) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)h),
        _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

INLINE __m256 e8m0_halves8(const uint8_t *exponents) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)exponents));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

INLINE __m256 halves8(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Chunk c of a group of n blocks (matmul_kernels.h): its 4n bytes in lanes 0..n-1. */
INLINE __m256i chunk32(const uint8_t *group, int n, int c) {
    if (n == 8) {
        return _mm256_loadu_si256((const __m256i *)(group + 32 * c));
    }
    return _mm256_maskload_epi32((const int *)(group + 4 * n * c), first_lanes(n));
}

/* The fifth bits of chunk c: bit 4j + i for element i of block j */
INLINE uint32_t chunk_fifth_bits(const uint8_t *fifth, int n, int c) {
    if (n == 8) {
        uint32_t h;
        memcpy(&h, fifth + 4 * c, sizeof h);
        return h;
    }
    return (uint32_t)llamay_read_bits(fifth, 4 * n * c, 4 * n);
}

/* vpmaddubsw of signed w with x: |w| x (x negated where w < 0), which cannot saturate while
   |w| and |x| are at most 127 (and w = -128 meets no x = -128: activations stop at -127) */
INLINE __m256i signed_pairs(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

typedef struct {
    __m256i w[8]; /* the group's eight 32-byte chunks: unsigned codes, or signed values */
    __m256 d, m;  /* the blocks' scales (and mins, for Q4_1 and Q5_1) */
} group32;

/* a group of n blocks; lanes past n hold anything (group_step leaves them out) */
INLINE void load_group32(int type, const uint8_t *group, int n, __m256i table, group32 *G) {
    if (type == LLAMAY_TYPE_Q8_0) {
        for (int c = 0; c < 8; c++) {
            G->w[c] = chunk32(group, n, c);
        }
    } else {
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 2; s++) {
                const __m256i y = chunk32(group, n, 2 * h + s);
                G->w[4 * h + s] = _mm256_and_si256(y, low4);
                G->w[4 * h + 2 + s] = _mm256_and_si256(_mm256_srli_epi16(y, 4), low4);
            }
        }
        const uint8_t *fifth = group + llamay_packed_fifth_bits_offset(type, n);
        for (int c = 0; c < 8; c++) {
            if (type == LLAMAY_TYPE_IQ4_NL || type == LLAMAY_TYPE_MXFP4) {
                G->w[c] = _mm256_shuffle_epi8(table, G->w[c]);
            }
            if (llamay_packed_has_fifth_bits(type)) {
                G->w[c] = _mm256_or_si256(G->w[c], fifth_bits32(chunk_fifth_bits(fifth, n, c)));
            }
        }
    }
    /* a partial group's scales and mins, copied out whole: masked loads are by 4 bytes */
    uint8_t tail[2][16] = {{0}};
    const uint8_t *scales = group + llamay_packed_scales_offset(type, n);
    const uint8_t *mins = group + llamay_packed_mins_offset(type, n);
    if (n < 8) {
        memcpy(tail[0], scales, (size_t)(mins - scales));
        scales = tail[0];
        if (llamay_packed_has_mins(type)) {
            memcpy(tail[1], mins, 2 * (size_t)n);
            mins = tail[1];
        }
    }
    G->d = type == LLAMAY_TYPE_MXFP4 ? e8m0_halves8(scales) : halves8(scales);
    if (llamay_packed_has_mins(type)) {
        G->m = halves8(mins);
    }
}

/* acc's lanes in `keep` (the group's blocks present; all when `whole`) += each block's terms
   with the activation's interleaved quants, scales and sums at group g. */
INLINE __m256 group_step(int type, const group32 *G, const llamay_act_q *a, int g, __m256i keep,
                         int whole, __m256 acc) {
    const int8_t *qs = a->qs + 256 * g;
    const float *d = a->d + 8 * g;
    const int16_t *sum = a->sum + 8 * g;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 8; c++) { /* lane j of chunk c: four quants of block j */
        const __m256i x = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        const __m256i pairs = offset_shift32(type) < 0 ? signed_pairs(G->w[c], x)
                                                       : _mm256_maddubs_epi16(G->w[c], x);
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, ones));
    }
    const __m256 da = _mm256_loadu_ps(d);
    const __m256i asum = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)sum));
    if (offset_shift32(type) > 0) {
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(asum, offset_shift32(type)));
    }
    __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(G->d, da), _mm256_cvtepi32_ps(isum), acc);
    if (llamay_packed_has_mins(type)) {
        s = _mm256_fmadd_ps(_mm256_mul_ps(G->m, da), _mm256_cvtepi32_ps(asum), s);
    }
    return whole ? s : _mm256_blendv_ps(acc, s, _mm256_castsi256_ps(keep));
}

typedef __m256i q32_table;

INLINE q32_table q32_table_for(int type) {
    return lookup_table(type == LLAMAY_TYPE_MXFP4 ? kvalues_mxfp4 : kvalues_iq4nl);
}

/* Rows are walked whole groups first, their layout known at compile time, then the partial
   group that ends a row whose blocks are not a multiple of eight. */

/* Decode: group g (of n blocks) of one row against one token. */
INLINE __m256 row_group(int type, const uint8_t *row, const llamay_act_q *a, int g, int n,
                        __m256i table, __m256 acc) {
    group32 G;
    load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G);
    return group_step(type, &G, a, g, first_lanes(n), n == 8, acc);
}

/* Decode: one row against one token, the accumulator in a register. */
INLINE float q32_row(int type, const llamay_weight *w, const llamay_act_q *a, int r,
                     __m256i table) {
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

/* Prefill: group g (of n blocks) of one row, decoded once for every token of the chunk. */
INLINE void tile_group(int type, const uint8_t *row, const llamay_weight *w, const uint8_t *act,
                       int t0, int n_tok, int g, int n, __m256 *acc, __m256i table) {
    group32 G;
    load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G);
    const __m256i keep = first_lanes(n);
    for (int t = 0; t < n_tok; t++) {
        const llamay_act_q a = llamay_act_q_of(w, act, t0 + t);
        acc[t] = group_step(type, &G, &a, g, keep, n == 8, acc[t]);
    }
}

/* Prefill: one row's groups against a chunk of tokens (with eight chunks in registers, one
   row is what sixteen registers hold). */
INLINE void q32_row_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int n_tok,
                         int r, float (*results)[LLAMAY_ROW_BLOCK], int column, __m256 *acc,
                         __m256i table) {
    const int nb = w->n_cols / 32;
    const uint8_t *row = w->packed + (size_t)r * w->packed_row_bytes;
    for (int t = 0; t < n_tok; t++) {
        acc[t] = _mm256_setzero_ps();
    }
    int g = 0;
    for (; g < nb / 8; g++) {
        tile_group(type, row, w, act, t0, n_tok, g, 8, acc, table);
    }
    if (nb % 8) {
        tile_group(type, row, w, act, t0, n_tok, g, nb % 8, acc, table);
    }
    for (int t = 0; t < n_tok; t++) {
        results[t][column] = tree8_ps(acc[t]);
    }
}

typedef __m256 q32_acc;

/* Tiles of two rows: Q8_0's, whose quants need no decoding, read each activation chunk once
   for both rows (the other formats decode a row's group once for every token, a row a time). */
#define Q32_TILE_ROWS 2
/* Q8_0 tokens a pass: with four, the twelve registers the pass keeps (eight sums, two rows'
   chunks and their magnitudes) and the ones, the chunk and the products spilled. */
#define Q8_0_TOKENS 3

/* Q8_0 prefill: whole group g of rows w0 and w1 against tokens t .. t + T - 1 (at index i of
   acc; T at most Q8_0_TOKENS). Each chunk of the rows is loaded once for the T tokens, and each
   token's chunk once for both rows. The sums are group_step's integers, and the scale step is
   its fp32 step, so the bits are the same. */
INLINE void q8_0_group_tokens(const uint8_t *w0, const uint8_t *w1, const llamay_weight *w,
                              const uint8_t *act, int t0, int i, int g, __m256 d0, __m256 d1,
                              __m256 (*acc)[TOKEN_CHUNK], const int T) {
    const __m256i ones = _mm256_set1_epi16(1);
    llamay_act_q a[Q8_0_TOKENS];
    __m256i sum0[Q8_0_TOKENS], sum1[Q8_0_TOKENS];
    for (int k = 0; k < T; k++) {
        a[k] = llamay_act_q_of(w, act, t0 + i + k);
        sum0[k] = sum1[k] = _mm256_setzero_si256();
    }
    for (int c = 0; c < 8; c++) {
        const __m256i s0 = _mm256_loadu_si256((const __m256i *)(w0 + 32 * c));
        const __m256i s1 = _mm256_loadu_si256((const __m256i *)(w1 + 32 * c));
        const __m256i u0 = _mm256_sign_epi8(s0, s0), u1 = _mm256_sign_epi8(s1, s1);
        for (int k = 0; k < T; k++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(a[k].qs + 256 * g + 32 * c));
            const __m256i p0 = _mm256_maddubs_epi16(u0, _mm256_sign_epi8(x, s0));
            const __m256i p1 = _mm256_maddubs_epi16(u1, _mm256_sign_epi8(x, s1));
            sum0[k] = _mm256_add_epi32(sum0[k], _mm256_madd_epi16(p0, ones));
            sum1[k] = _mm256_add_epi32(sum1[k], _mm256_madd_epi16(p1, ones));
        }
    }
    for (int k = 0; k < T; k++) {
        const __m256 da = _mm256_loadu_ps(a[k].d + 8 * g);
        acc[0][i + k] =
            _mm256_fmadd_ps(_mm256_mul_ps(d0, da), _mm256_cvtepi32_ps(sum0[k]), acc[0][i + k]);
        acc[1][i + k] =
            _mm256_fmadd_ps(_mm256_mul_ps(d1, da), _mm256_cvtepi32_ps(sum1[k]), acc[1][i + k]);
    }
}

/* Q8_0 prefill: rows r0 and r0 + 1 against a chunk of tokens; the partial group that may end
   the rows goes through tile_group, a row a time, onto the same accumulators. */
INLINE void q8_0_pair_tile(const llamay_weight *w, const uint8_t *act, int t0, int n_tok,
                           int r0, float (*results)[LLAMAY_ROW_BLOCK], int column,
                           __m256 (*acc)[TOKEN_CHUNK], __m256i table) {
    const int nb = w->n_cols / 32;
    const size_t group_bytes = llamay_packed_group_bytes(LLAMAY_TYPE_Q8_0, 8);
    const uint8_t *row[2] = {w->packed + (size_t)r0 * w->packed_row_bytes,
                             w->packed + (size_t)(r0 + 1) * w->packed_row_bytes};
    for (int t = 0; t < n_tok; t++) {
        acc[0][t] = acc[1][t] = _mm256_setzero_ps();
    }
    const int scales = llamay_packed_scales_offset(LLAMAY_TYPE_Q8_0, 8);
    for (int g = 0; g < nb / 8; g++) {
        const uint8_t *w0 = row[0] + g * group_bytes, *w1 = row[1] + g * group_bytes;
        const __m256 d0 = halves8(w0 + scales), d1 = halves8(w1 + scales);
        int i = 0;
        for (; i + Q8_0_TOKENS <= n_tok; i += Q8_0_TOKENS) {
            q8_0_group_tokens(w0, w1, w, act, t0, i, g, d0, d1, acc, Q8_0_TOKENS);
        }
        switch (n_tok - i) { /* fewer than Q8_0_TOKENS left */
        case 2: q8_0_group_tokens(w0, w1, w, act, t0, i, g, d0, d1, acc, 2); break;
        case 1: q8_0_group_tokens(w0, w1, w, act, t0, i, g, d0, d1, acc, 1); break;
        default: break;
        }
    }
    for (int r = 0; r < 2; r++) {
        if (nb % 8) {
            tile_group(LLAMAY_TYPE_Q8_0, row[r], w, act, t0, n_tok, nb / 8, nb % 8, acc[r],
                       table);
        }
        for (int t = 0; t < n_tok; t++) {
            results[t][column + r] = tree8_ps(acc[r][t]);
        }
    }
}

INLINE void q32_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int n_tok,
                     int r0, float (*results)[LLAMAY_ROW_BLOCK], int column, const int rows,
                     __m256 (*acc)[TOKEN_CHUNK], __m256i table) {
    if (type == LLAMAY_TYPE_Q8_0 && rows == 2) {
        q8_0_pair_tile(w, act, t0, n_tok, r0, results, column, acc, table);
        return;
    }
    for (int r = 0; r < rows; r++) {
        q32_row_tile(type, w, act, t0, n_tok, r0 + r, results, column + r, acc[r], table);
    }
}

/* No separate path for decode steps of a few tokens: the one-row tile above already reads each
   row once for every token, and a streaming path like AVX-512's measured slower here (its
   activation rows through an array instead of computed). */
#define MATMUL_Q32_ROW_TOKENS 0

/* ======================= 256-element formats x Q8_K ======================= */

/* Q2_K..Q6_K and IQ4_XS, this set's 256-element types, read the KX8 copy (matmul_kx8.h). */
#define MATMUL_K_ROW 0

#define MATMUL_FN(name) avx2_##name
#define MATMUL_KERNEL_OF llamay_avx2_kernel
#define MATMUL_COLUMN(avx2, avx512, neon) avx2
#include "matmul_kx8.h"
#include "matmul_driver.h"

#else

llamay_matmul_fn llamay_avx2_kernel(int type) {
    (void)type;
    return NULL;
}

#endif
