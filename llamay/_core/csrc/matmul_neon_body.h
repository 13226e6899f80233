/* The NEON matmul kernels (aarch64), written once and compiled twice: by matmul_neon.c for
   every AArch64 CPU, and by matmul_neon_dotprod.c with the dot product instructions, which
   matmul_neon.c runs where the CPU has them. The two builds differ only in dot4x2 and give the
   same integers, so the same bits: the reference's (matmul_ref.c, in matmul.h's order).

   Every integer dot product multiplies signed bytes by signed bytes, four to a 32-bit lane:
   the 32-element formats' values (Q4_0's code - 8, Q5_0's code - 16, the lookup types' table
   values, Q8_0's quants) and the K-quants' codes go in as they are, so that no offset has to
   be taken back. In the packed copy of the 32-element formats (matmul_kernels.h) lane j of a
   chunk's first 16 bytes is block j of the group, of its last 16 bytes block j + 4: a group is
   two halves of four blocks, each half's eight chunks summed into four lanes, which are the
   canonical lanes b % 8 of its blocks. The K-quants read the KX8 copy through matmul_kx8.h,
   whose lane is a row.

   Included by those two files, which define MATMUL_FN and MATMUL_KERNEL_OF (matmul_driver.h). */
#include <arm_neon.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "fp16.h"
#include "iq_tables.h"
#include "matmul_kernels.h"
#include "quants.h"

#define LLAMAY_VEC LLAMAY_VEC_NEON
#include "vec16.h"

#define INLINE static inline __attribute__((always_inline))

/* Tokens whose accumulators are kept while a tile of weight rows is decoded once. */
#define TOKEN_CHUNK 64

/* ======================= integer dot products ======================= */

/* acc + the dot products of a with x and of b with y, four bytes to each 32-bit lane. Exact in
   both builds for any bytes: SDOT sums into int32; without it, each product (at most 128 x 128
   in magnitude) is exact in int16, and products are summed in pairs into int32. */
#if defined(__ARM_FEATURE_DOTPROD)
INLINE int32x4_t dot4x2(int32x4_t acc, int8x16_t a, int8x16_t x, int8x16_t b, int8x16_t y) {
    return vdotq_s32(vdotq_s32(acc, a, x), b, y);
}
#else
INLINE int32x4_t dot4x2(int32x4_t acc, int8x16_t a, int8x16_t x, int8x16_t b, int8x16_t y) {
    /* [bytes 0-1, 2-3, 4-5, 6-7] of both products, then of bytes 8-15 */
    int32x4_t low = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(x)));
    low = vpadalq_s16(low, vmull_s8(vget_low_s8(b), vget_low_s8(y)));
    int32x4_t high = vpaddlq_s16(vmull_high_s8(a, x));
    high = vpadalq_s16(high, vmull_high_s8(b, y));
    return vaddq_s32(acc, vpaddq_s32(low, high));
}
#endif

/* lanes [0, n) all ones, the rest 0 (n <= 4) */
INLINE uint32x4_t first_lanes4(int n) {
    static const int32_t lane[4] = {0, 1, 2, 3};
    return vcltq_s32(vld1q_s32(lane), vdupq_n_s32(n));
}

/* llamay_tree8 of the lanes of a (lanes 0-3) and b (lanes 4-7) */
INLINE float tree8_pair(float32x4_t a, float32x4_t b) { return v16_tree_last(vaddq_f32(a, b)); }

/* ======================= fp32 weights: F32, F16, BF16 ======================= */

INLINE int element_bytes(int type) { return type == LLAMAY_TYPE_F32 ? 4 : 2; }

/* sixteen weights at p, as fp32 */
INLINE v16 load_weights16(int type, const uint8_t *p) {
    switch (type) {
    case LLAMAY_TYPE_F16: return v16_load_f16((const uint16_t *)p);
    case LLAMAY_TYPE_BF16: {
        v16 r;
        for (int k = 0; k < 4; k++) {
            r.v[k] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + 4 * k), 16));
        }
        return r;
    }
    default: return v16_load((const float *)p);
    }
}

/* rows x tokens outputs, sixteen lanes each (vec16.h's four registers); element i into lane
   i % 16, the lanes' tree at the end */
INLINE void float_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int r0,
                       float *out, size_t out_stride, const int rows, const int tokens) {
    v16 acc[4][2];
    const uint8_t *wrow[4];
    const float *x[2];
    const int eb = element_bytes(type);
    for (int r = 0; r < rows; r++) {
        wrow[r] = w->data + (size_t)(r0 + r) * w->row_bytes;
        for (int t = 0; t < tokens; t++) {
            acc[r][t] = v16_zero();
        }
    }
    for (int t = 0; t < tokens; t++) {
        x[t] = (const float *)(act + (size_t)(t0 + t) * w->act_row_bytes);
    }
    const int n = w->n_cols;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int r = 0; r < rows; r++) {
            const v16 wv = load_weights16(type, wrow[r] + (size_t)i * eb);
            for (int t = 0; t < tokens; t++) {
                acc[r][t] = v16_fma(wv, v16_load(x[t] + i), acc[r][t]);
            }
        }
    }
    if (i < n) {
        /* the tail through zero-padded copies; lanes past the end keep their sums (an added
           0 x 0 would turn a -0 into +0) */
        static const float lane[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        const m16 keep = v16_lt(v16_load(lane), v16_set1((float)(n - i)));
        for (int r = 0; r < rows; r++) {
            uint8_t ws[64] = {0};
            memcpy(ws, wrow[r] + (size_t)i * eb, (size_t)(n - i) * eb);
            const v16 wv = load_weights16(type, ws);
            for (int t = 0; t < tokens; t++) {
                const v16 s = v16_fma(wv, v16_load_partial(x[t] + i, n - i), acc[r][t]);
                acc[r][t] = v16_select(keep, s, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        for (int t = 0; t < tokens; t++) {
            out[(size_t)(t0 + t) * out_stride + r0 + r] = v16_tree(acc[r][t]);
        }
    }
}

/* the prefill tile: two rows by two tokens, sixteen registers of sums */
#define FLOAT_TILE_ROWS 2
#define FLOAT_TILE_TOKENS 2

/* ======================= 32-element formats x Q8_0, packed ======================= */

/* What a code stands for less (Q4_0: q - 8, Q5_0: q - 16); 0 where the code is the value (Q4_1,
   Q5_1, whose mins are a term of their own) or is looked up (IQ4_NL, MXFP4) */
INLINE int value_offset32(int type) {
    switch (type) {
    case LLAMAY_TYPE_Q4_0: return 8;
    case LLAMAY_TYPE_Q5_0: return 16;
    default: return 0;
    }
}

INLINE int looks_up32(int type) {
    return type == LLAMAY_TYPE_IQ4_NL || type == LLAMAY_TYPE_MXFP4;
}

typedef int8x16_t q32_table;

INLINE q32_table q32_table_for(int type) {
    return vld1q_s8(type == LLAMAY_TYPE_MXFP4 ? kvalues_mxfp4 : kvalues_iq4nl);
}

/* A group of eight blocks decoded: its two halves (blocks 0-3, 4-7), each the half's part of
   the eight chunks as signed values, and the blocks' scales (and mins) as fp32 */
typedef struct {
    int8x16_t w[2][8];
    float32x4_t d[2], m[2];
} group32;

/* the largest group of eight blocks: Q8_0's 256 quants and 8 scales */
#define GROUP32_MAX_BYTES 272

/* A group of n < 8 blocks (the end of a row) laid out as a group of eight whose missing
   blocks are zeros: each 4n-byte piece of its quants (a chunk, or two chunks' nibbles) to 32
   bytes, chunk c's 4n fifth bits to bit 32c, the scales and mins to 8-entry arrays. */
static void widen_group32(int type, const uint8_t *group, int n, uint8_t *whole) {
    memset(whole, 0, (size_t)llamay_packed_group_bytes(type, 8));
    const int pieces = type == LLAMAY_TYPE_Q8_0 ? 8 : 4;
    for (int k = 0; k < pieces; k++) {
        memcpy(whole + 32 * k, group + 4 * n * k, 4 * (size_t)n);
    }
    if (llamay_packed_has_fifth_bits(type)) {
        const uint8_t *fifth = group + llamay_packed_fifth_bits_offset(type, n);
        for (int c = 0; c < 8; c++) {
            const uint32_t bits = (uint32_t)llamay_read_bits(fifth, 4 * n * c, 4 * n);
            memcpy(whole + llamay_packed_fifth_bits_offset(type, 8) + 4 * c, &bits, 4);
        }
    }
    const int scale_bytes = type == LLAMAY_TYPE_MXFP4 ? 1 : 2;
    memcpy(whole + llamay_packed_scales_offset(type, 8),
           group + llamay_packed_scales_offset(type, n), (size_t)(scale_bytes * n));
    if (llamay_packed_has_mins(type)) {
        memcpy(whole + llamay_packed_mins_offset(type, 8),
               group + llamay_packed_mins_offset(type, n), 2 * (size_t)n);
    }
}

/* Half `half` of a chunk's 32 fifth bits (bit 4j + i: element i of block j) as bytes of 0x10
   where set */
INLINE uint8x16_t fifth_bits16(uint32_t bits, int half) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint32_t mine = bits >> (16 * half);
    const uint8x16_t spread =
        vcombine_u8(vdup_n_u8((uint8_t)(mine & 0xFF)), vdup_n_u8((uint8_t)((mine >> 8) & 0xFF)));
    return vandq_u8(vtstq_u8(spread, vld1q_u8(bit)), vdupq_n_u8(0x10));
}

/* four fp16 */
INLINE float32x4_t halves4(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p)));
}

/* four E8M0 exponents, as llamay_e8m0_to_fp32_half */
INLINE float32x4_t e8m0_halves4(const uint8_t *e) {
    float f[4];
    for (int i = 0; i < 4; i++) {
        f[i] = llamay_e8m0_to_fp32_half(e[i]);
    }
    return vld1q_f32(f);
}

/* A group of n blocks (a partial one widened first); the lanes of missing blocks hold
   anything (group_step leaves them out). */
INLINE void load_group32(int type, const uint8_t *group, int n, q32_table table, group32 *G) {
    uint8_t whole[GROUP32_MAX_BYTES];
    if (n < 8) {
        widen_group32(type, group, n, whole);
        group = whole;
    }
    const uint8_t *fifth = group + llamay_packed_fifth_bits_offset(type, 8);
    const uint8_t *scales = group + llamay_packed_scales_offset(type, 8);
    for (int half = 0; half < 2; half++) {
        if (type == LLAMAY_TYPE_Q8_0) {
            for (int c = 0; c < 8; c++) {
                G->w[half][c] = vld1q_s8((const int8_t *)group + 32 * c + 16 * half);
            }
        } else {
            /* bytes 64h + 32s: chunk 4h + s in the low nibbles, 4h + 2 + s in the high ones */
            uint8x16_t codes[8];
            for (int h = 0; h < 2; h++) {
                for (int s = 0; s < 2; s++) {
                    const uint8x16_t y = vld1q_u8(group + 64 * h + 32 * s + 16 * half);
                    codes[4 * h + s] = vandq_u8(y, vdupq_n_u8(0x0F));
                    codes[4 * h + 2 + s] = vshrq_n_u8(y, 4);
                }
            }
            for (int c = 0; c < 8; c++) {
                if (llamay_packed_has_fifth_bits(type)) {
                    uint32_t bits;
                    memcpy(&bits, fifth + 4 * c, sizeof bits);
                    codes[c] = vorrq_u8(codes[c], fifth_bits16(bits, half));
                }
                G->w[half][c] =
                    looks_up32(type)
                        ? vqtbl1q_s8(table, codes[c])
                        : vsubq_s8(vreinterpretq_s8_u8(codes[c]),
                                   vdupq_n_s8((int8_t)value_offset32(type)));
            }
        }
        G->d[half] = type == LLAMAY_TYPE_MXFP4 ? e8m0_halves4(scales + 4 * half)
                                               : halves4(scales + 8 * half);
        if (llamay_packed_has_mins(type)) {
            G->m[half] = halves4(group + llamay_packed_mins_offset(type, 8) + 8 * half);
        }
    }
}

typedef struct {
    float32x4_t v[2]; /* lanes 0-3 and 4-7 */
} q32_acc;

/* acc's lanes of the group's n blocks += each block's terms with the activation's interleaved
   quants, scales and sums at group g: per lane, fmaf(d_w * d_a, i1, lane), then for Q4_1 and
   Q5_1 fmaf(m_w * d_a, sum, lane) (matmul.h) */
INLINE void group_step(int type, const group32 *G, const llamay_act_q *a, int g, int n,
                       q32_acc *acc) {
    const int8_t *qs = a->qs + 256 * g;
    for (int half = 0; half < 2 && 4 * half < n; half++) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int c = 0; c < 8; c += 2) {
            isum = dot4x2(isum, G->w[half][c], vld1q_s8(qs + 32 * c + 16 * half),
                          G->w[half][c + 1], vld1q_s8(qs + 32 * (c + 1) + 16 * half));
        }
        const float32x4_t da = vld1q_f32(a->d + 8 * g + 4 * half);
        float32x4_t s = vfmaq_f32(acc->v[half], vmulq_f32(G->d[half], da), vcvtq_f32_s32(isum));
        if (llamay_packed_has_mins(type)) {
            const int32x4_t asum = vmovl_s16(vld1_s16(a->sum + 8 * g + 4 * half));
            s = vfmaq_f32(s, vmulq_f32(G->m[half], da), vcvtq_f32_s32(asum));
        }
        const int present = n - 4 * half;
        acc->v[half] = present >= 4 ? s : vbslq_f32(first_lanes4(present), s, acc->v[half]);
    }
}

INLINE q32_acc q32_acc_zero(void) {
    q32_acc acc = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    return acc;
}

/* Rows are walked whole groups first, their layout known at compile time, then the partial
   group that ends a row whose blocks are not a multiple of eight. */

/* Decode: group g (of n blocks) of one row against one token. */
INLINE void row_group(int type, const uint8_t *row, const llamay_act_q *a, int g, int n,
                      q32_table table, q32_acc *acc) {
    group32 G;
    load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G);
    group_step(type, &G, a, g, n, acc);
}

/* Decode: one row against one token. */
INLINE float q32_row(int type, const llamay_weight *w, const llamay_act_q *a, int r,
                     q32_table table) {
    const int nb = w->n_cols / 32;
    const uint8_t *row = w->packed + (size_t)r * w->packed_row_bytes;
    q32_acc acc = q32_acc_zero();
    int g = 0;
    for (; g < nb / 8; g++) { /* rows lie end to end: the next row's lines are asked for */
        llamay_prefetch_ahead_part(row, w->packed_row_bytes, g, (nb + 7) / 8);
        row_group(type, row, a, g, 8, table, &acc);
    }
    if (nb % 8) {
        llamay_prefetch_ahead_part(row, w->packed_row_bytes, g, (nb + 7) / 8);
        row_group(type, row, a, g, nb % 8, table, &acc);
    }
    return tree8_pair(acc.v[0], acc.v[1]);
}

/* Prefill: group g (of n blocks) of one row, decoded once for every token of the chunk. */
INLINE void tile_group(int type, const uint8_t *row, const llamay_weight *w, const uint8_t *act,
                       int t0, int n_tok, int g, int n, q32_acc *acc, q32_table table) {
    group32 G;
    load_group32(type, row + (size_t)g * llamay_packed_group_bytes(type, 8), n, table, &G);
    for (int t = 0; t < n_tok; t++) {
        const llamay_act_q a = llamay_act_q_of(w, act, t0 + t);
        group_step(type, &G, &a, g, n, &acc[t]);
    }
}

/* Prefill: a row at a time (a decoded group takes sixteen registers), each group decoded once
   for every token of the chunk. */
#define Q32_TILE_ROWS 1

INLINE void q32_tile(int type, const llamay_weight *w, const uint8_t *act, int t0, int n_tok,
                     int r0, float (*results)[LLAMAY_ROW_BLOCK], int column, const int rows,
                     q32_acc (*acc)[TOKEN_CHUNK], q32_table table) {
    const int nb = w->n_cols / 32;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w->packed + (size_t)(r0 + r) * w->packed_row_bytes;
        for (int t = 0; t < n_tok; t++) {
            acc[r][t] = q32_acc_zero();
        }
        int g = 0;
        for (; g < nb / 8; g++) {
            tile_group(type, row, w, act, t0, n_tok, g, 8, acc[r], table);
        }
        if (nb % 8) {
            tile_group(type, row, w, act, t0, n_tok, g, nb % 8, acc[r], table);
        }
        for (int t = 0; t < n_tok; t++) {
            results[t][column + r] = tree8_pair(acc[r][t].v[0], acc[r][t].v[1]);
        }
    }
}

/* No separate path for decode steps of a few tokens: the one-row tile already reads each row
   once for every token. */
#define MATMUL_Q32_ROW_TOKENS 0

/* ======================= 256-element formats x Q8_K ======================= */

/* Q2_K..Q6_K and IQ4_XS read the KX8 copy; the other 256-element types run the reference. */
#define KX8_NEON 1
#include "matmul_kx8.h"
#define MATMUL_K_ROW 0

#define MATMUL_COLUMN(avx2, avx512, neon) neon
#include "matmul_driver.h"
